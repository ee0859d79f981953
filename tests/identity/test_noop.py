from __future__ import annotations

import pytest

from gateway.config import DEFAULT_USER_ID
from gateway.identity.noop import NoopAuthenticator
from gateway.schema.errors import ApiError


async def test_noop_user_from_query_or_default():
    auth = NoopAuthenticator()
    assert (await auth.authenticate({}, {})).user_id == DEFAULT_USER_ID
    assert (await auth.authenticate({}, {"user_id": "alice"})).user_id == "alice"
    with pytest.raises(ApiError) as caught:
        await auth.authenticate({}, {"user_id": " "})
    # LCORE's exact body: a plain string.
    assert caught.value.status == 400 and caught.value.body(openai=False) == {"detail": "user_id cannot be empty"}
