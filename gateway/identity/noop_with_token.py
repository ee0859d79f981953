"""`noop-with-token`: a bearer token is required but not verified; it is passed on
(e.g. to MCP servers configured with `kubernetes` authorization)."""

from __future__ import annotations

from typing import Mapping

from gateway.config import AuthenticationConfig, DEFAULT_USERNAME
from gateway.identity import Identity
from gateway.identity.noop import user_from_query
from gateway.schema.errors import unauthorized


def bearer_token(headers: Mapping[str, str]) -> str:
    header = headers.get("Authorization")
    if header is None:
        raise unauthorized("No Authorization header found", code="missing_credentials")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise unauthorized("No token found in Authorization header")
    return token.strip()


class NoopWithTokenAuthenticator:
    credential_header = "Authorization"

    def __init__(self, config: AuthenticationConfig | None = None):
        pass

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        token = bearer_token(headers)
        return Identity(user_id=user_from_query(query), username=DEFAULT_USERNAME, token=token,
                        skip_userid_check=True)

    async def close(self) -> None:
        pass
