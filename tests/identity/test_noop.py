from __future__ import annotations

import pytest

from gateway.config import DEFAULT_USER_ID
from gateway.identity.noop import NoopAuthenticator
from gateway.identity.noop_with_token import NoopWithTokenAuthenticator
from gateway.schema.errors import ApiError


async def test_noop_user_from_query_or_default():
    auth = NoopAuthenticator()
    assert (await auth.authenticate({}, {})).user_id == DEFAULT_USER_ID
    assert (await auth.authenticate({}, {"user_id": "alice"})).user_id == "alice"
    with pytest.raises(ApiError) as caught:
        await auth.authenticate({}, {"user_id": " "})
    # LCORE's exact body: a plain string.
    assert caught.value.status == 400 and caught.value.body(openai=False) == {"detail": "user_id cannot be empty"}


@pytest.mark.parametrize("header, cause", [
    (None, "No Authorization header found"), ("Token abc", "No token found in Authorization header"),
    ("Bearer", "No token found in Authorization header")])
async def test_noop_with_token_refuses(header, cause):
    headers = {} if header is None else {"Authorization": header}
    with pytest.raises(ApiError) as caught:
        await NoopWithTokenAuthenticator().authenticate(headers, {})
    assert caught.value.status == 401 and caught.value.cause == cause
    assert caught.value.headers["WWW-Authenticate"] == "Bearer"


async def test_noop_with_token_keeps_token():
    identity = await NoopWithTokenAuthenticator().authenticate({"Authorization": "bearer  xyz "}, {"user_id": "b"})
    assert identity.token == "xyz" and identity.user_id == "b"
