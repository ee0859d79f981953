"""`api-key-token`: `Authorization: Bearer <key>` must be one of the configured keys.

LCORE's single `api_key_config.api_key` is LCORE's default user (as LCORE, with
`skip_userid_check`); our `api_key_config.keys` give each team its own key, user and
roles. Every key is compared in constant time (`hmac.compare_digest` on SHA-256
digests, all of them, whichever matches), so response times say nothing about a key.
The key is the gateway's credential: it is never passed on (`Identity.token` stays
empty, so an MCP server configured with `kubernetes` gets nothing from it).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Mapping

from gateway.config import DEFAULT_USER_ID, DEFAULT_USERNAME, AuthenticationConfig
from gateway.identity import Identity
from gateway.identity.noop_with_token import bearer_token
from gateway.schema.errors import invalid_api_key


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class ApiKeyAuthenticator:
    credential_header = "Authorization"

    def __init__(self, authentication: AuthenticationConfig):
        config = authentication.api_key_config
        assert config is not None   # required by module api-key-token (`AuthenticationConfig._module_block`)
        self._keys: list[tuple[bytes, Identity]] = []
        if config.api_key is not None:
            self._keys.append((_digest(config.api_key.get_secret_value()),
                               Identity(user_id=DEFAULT_USER_ID, username=DEFAULT_USERNAME, skip_userid_check=True)))
        for entry in config.keys:
            username = entry.username or entry.user_id
            self._keys.append((_digest(entry.secret.get_secret_value()), Identity(
                user_id=entry.user_id, username=username, roles=tuple(entry.roles),
                document={"user_id": entry.user_id, "username": username, "roles": list(entry.roles)})))

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        digest = _digest(bearer_token(headers))
        found = None
        for key, identity in self._keys:
            if hmac.compare_digest(digest, key):
                found = identity  # no early exit: every key costs the same
        if found is None:
            raise invalid_api_key()
        return found

    async def close(self) -> None:
        pass
