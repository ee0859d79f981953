"""`noop`: nothing is checked; the user is `?user_id=` or LCORE's default user."""

from __future__ import annotations

from typing import Mapping

from gateway.config import AuthenticationConfig, DEFAULT_USER_ID, DEFAULT_USERNAME
from gateway.identity import Identity
from gateway.schema.errors import bad_request


def user_from_query(query: Mapping[str, str]) -> str:
    if "user_id" not in query:
        return DEFAULT_USER_ID
    user_id = query["user_id"].strip()
    if not user_id:
        raise bad_request("user_id cannot be empty", param="user_id", code="invalid_user_id")
    return user_id


class NoopAuthenticator:
    credential_header = "Authorization"

    def __init__(self, config: AuthenticationConfig | None = None):
        pass

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        return Identity(user_id=user_from_query(query), username=DEFAULT_USERNAME, skip_userid_check=True)

    async def close(self) -> None:
        pass
