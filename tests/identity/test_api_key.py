"""api-key-token: LCORE's one key (its default user) and our per-team keys, LCORE's 401s."""

from __future__ import annotations

import pytest

from gateway.config import DEFAULT_USER_ID, DEFAULT_USERNAME, AuthenticationConfig
from gateway.identity.api_key import ApiKeyAuthenticator
from gateway.schema.errors import ApiError

CONFIG = AuthenticationConfig(module="api-key-token", api_key_config={"api_key": "lcore-key-0001", "keys": [
    {"key": "team-a-key-0001", "user_id": "team-a", "roles": ["chat"]},
    {"key": "team-b-key-0001", "user_id": "team-b", "username": "Team B"}]})


async def test_lcore_key_is_the_default_user():
    identity = await ApiKeyAuthenticator(CONFIG).authenticate({"Authorization": "Bearer lcore-key-0001"}, {})
    assert (identity.user_id, identity.username, identity.skip_userid_check) == (DEFAULT_USER_ID, DEFAULT_USERNAME, True)


async def test_team_keys_carry_identity_and_roles():
    auth = ApiKeyAuthenticator(CONFIG)
    a = await auth.authenticate({"Authorization": "Bearer team-a-key-0001"}, {"user_id": "someone-else"})
    assert (a.user_id, a.username, a.roles, a.skip_userid_check) == ("team-a", "team-a", ("chat",), False)
    b = await auth.authenticate({"Authorization": "bearer team-b-key-0001"}, {})
    assert (b.user_id, b.username, b.roles) == ("team-b", "Team B", ())
    # The key is the gateway's credential: never passed on (e.g. to `kubernetes` MCP headers).
    assert a.token == "" and b.token == ""


@pytest.mark.parametrize("header, detail", [
    (None, {"response": "Missing or invalid credentials provided by client", "cause": "No Authorization header found"}),
    ("Basic dXNlcjpwYXNz", {"response": "Missing or invalid credentials provided by client",
                            "cause": "No token found in Authorization header"}),
    ("Bearer team-a-key-0002", "Invalid API Key"),
    ("Bearer team-a-key-000", "Invalid API Key"),
    ("Bearer TEAM-A-KEY-0001", "Invalid API Key"),
])
async def test_refusals_are_lcore_401s(header, detail):
    headers = {} if header is None else {"Authorization": header}
    with pytest.raises(ApiError) as caught:
        await ApiKeyAuthenticator(CONFIG).authenticate(headers, {})
    assert caught.value.status == 401 and caught.value.body(openai=False) == {"detail": detail}
    assert caught.value.headers["WWW-Authenticate"] == "Bearer"
    assert header is None or header.split()[-1] not in str(caught.value.body())  # the presented key is not echoed
