"""The verified-token cache of `jwk-token`: never past a token's `exp`, forgotten when the
key set changes. The key set is put in place directly (the e2e tests fetch it for real)."""

from __future__ import annotations

import time

import pytest

from gateway.config import parse_config
from gateway.identity.jwk_token import JwkTokenAuthenticator
from gateway.identity.jwks import parse_key_set
from gateway.schema.errors import ApiError
from tests.support.auth_peers import SigningKey

KEY = SigningKey.rsa("k")


def authenticator(**jwk_config) -> JwkTokenAuthenticator:
    config = parse_config({"name": "x", "llama_stack": {"url": "http://127.0.0.1:1"}, "authentication": {
        "module": "jwk-token", "jwk_config": {"url": "http://127.0.0.1:1/jwks", **jwk_config}}})
    auth = JwkTokenAuthenticator(config.authentication)
    install(auth, KEY)
    return auth


def install(auth: JwkTokenAuthenticator, *keys: SigningKey) -> None:
    auth.jwks._keys = parse_key_set({"keys": [key.jwk() for key in keys]}, ["RS256"])
    auth.jwks._fetched_at = time.monotonic()
    auth.jwks.version += 1


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_cached_token_still_expires_at_its_exp():
    auth = authenticator(leeway_seconds=0, verified_token_cache_seconds=60)
    token = KEY.sign({"user_id": "u", "username": "n", "exp": time.time() + 1})
    assert (await auth.authenticate(bearer(token), {})).user_id == "u"
    assert (await auth.authenticate(bearer(token), {})).document["user_id"] == "u"  # from the cache
    time.sleep(1.1)
    with pytest.raises(ApiError) as caught:
        await auth.authenticate(bearer(token), {})
    assert caught.value.cause == "Token has expired"


async def test_a_new_key_set_forgets_verified_tokens():
    auth = authenticator()
    token = KEY.sign({"user_id": "u", "username": "n", "exp": time.time() + 600})
    await auth.authenticate(bearer(token), {})
    install(auth, SigningKey.rsa("other"))  # the key that signed it is gone
    auth.jwks._attempted_at = time.monotonic()  # and a refetch was just made
    with pytest.raises(ApiError) as caught:
        await auth.authenticate(bearer(token), {})
    assert caught.value.cause == "Token signed by unknown key"
