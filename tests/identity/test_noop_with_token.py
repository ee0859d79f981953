"""`noop-with-token`: a bearer token is required (LCORE's 401s for its absence or shape)
but not verified, and passed on; the user comes from the query as for `noop`."""

from __future__ import annotations

import pytest

from gateway.identity.noop_with_token import NoopWithTokenAuthenticator
from gateway.schema.errors import ApiError


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
