"""`rh-identity`: the caller is described by `x-rh-identity`, base64 JSON set by Red Hat's
3scale/Turnpike gateway. The header is trusted as sent: this module is safe only behind a
proxy that sets it and strips any copy a client sent. LCORE's statuses and plain-string
bodies: 401 without the header, 400 for anything malformed, 403 for missing entitlements."""

from __future__ import annotations

import base64
import binascii
import json
import logging
from typing import Any, Mapping

from gateway.config.auth import AuthenticationConfig, RhIdentityConfig
from gateway.identity import Identity
from gateway.schema.errors import ApiError, bad_request, unauthorized

log = logging.getLogger("gateway.identity.rh_identity")

HEADER = "x-rh-identity"
INVALID = "Invalid identity data"
_MAX_FIELD = 256


def _invalid(reason: str) -> ApiError:
    log.warning("rh-identity: identity validation failed: %s", reason)
    return bad_request(INVALID, param=HEADER, code="invalid_identity")


def _text(name: str, value: Any) -> str:
    """LCORE's checks of an identity string: non-blank, ≤ 256 characters, no control characters."""
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a string")
    if not value.strip() or len(value) > _MAX_FIELD or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise _invalid(f"{name} is empty, too long or has control characters")
    return value


def _section(identity: dict[str, Any], name: str) -> dict[str, Any]:
    section = identity.get(name)
    if not isinstance(section, dict):
        raise _invalid(f"missing '{name}'")
    return section


def user_of(document: Any) -> tuple[str, str]:
    """(user_id, username) of a decoded identity document, validated as LCORE does."""
    identity = document.get("identity") if isinstance(document, dict) else None
    if not isinstance(identity, dict) or "type" not in identity:
        raise _invalid("missing 'identity' or its 'type'")
    kind = identity["type"]
    if kind == "User":
        user = _section(identity, "user")
        result = _text("user_id", user.get("user_id")), _text("username", user.get("username"))
    elif kind == "ServiceAccount":
        account = _section(identity, "service_account")
        result = _text("client_id", account.get("client_id")), _text("username", account.get("username"))
    elif kind == "System":
        cn = _text("cn", _section(identity, "system").get("cn"))
        if identity.get("org_id") in (None, ""):
            raise _invalid("missing 'org_id' for System type")
        number = identity.get("account_number")
        if number not in (None, ""):
            _text("account_number", number)
        result = cn, number or cn
    else:
        raise _invalid("unsupported identity type")
    if identity.get("org_id") not in (None, ""):
        _text("org_id", identity["org_id"])
    return result


class RhIdentityAuthenticator:
    credential_header = HEADER

    def __init__(self, config: AuthenticationConfig):
        self._config = config.rh_identity_config or RhIdentityConfig()

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        raw = headers.get(HEADER)
        if not raw:
            raise unauthorized("Missing x-rh-identity header", code="missing_credentials",
                               detail="Missing x-rh-identity header")
        if len(raw) > self._config.max_header_size:
            raise bad_request("x-rh-identity header exceeds maximum allowed size", param=HEADER,
                              code="invalid_identity")
        try:
            text = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise bad_request("Invalid base64 encoding in x-rh-identity header", param=HEADER,
                              code="invalid_identity") from None
        try:
            document = json.loads(text)
        except ValueError:
            raise bad_request("Invalid JSON in x-rh-identity header", param=HEADER, code="invalid_identity") from None
        user_id, username = user_of(document)
        entitlements = document.get("entitlements")
        entitlements = entitlements if isinstance(entitlements, dict) else {}
        missing = [name for name in self._config.required_entitlements
                   if not (isinstance(entitlements.get(name), dict) and entitlements[name].get("is_entitled") is True)]
        if missing:
            log.warning("rh-identity: missing required entitlements: %s", ", ".join(missing))
            raise ApiError(403, "Insufficient entitlements", "Insufficient entitlements", code="insufficient_entitlements",
                           detail="Insufficient entitlements")
        return Identity(user_id=user_id, username=username, skip_userid_check=False, document=document)

    async def close(self) -> None:
        pass   # nothing held (the `Authenticator` protocol: called at shutdown)
