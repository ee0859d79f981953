"""Which algorithms a JWKS key may verify, and how a key set document is judged."""

from __future__ import annotations

import pytest

from gateway.identity.jwks import INVALID_DATA, MALFORMED, KeySetUnavailable, key_algorithms, parse_key_set
from tests.support.auth_peers import SigningKey

ALLOW = ["RS256", "PS256", "ES256", "ES384", "EdDSA"]


@pytest.mark.parametrize("jwk, expected", [
    ({"kty": "RSA", "alg": "RS256"}, {"RS256"}),
    ({"kty": "RSA"}, {"RS256", "PS256"}),                 # no alg: kty and the allow-list
    ({"kty": "RSA", "alg": "RS512"}, {"RS512"}),          # the key's own alg wins over the list
    ({"kty": "EC", "crv": "P-256"}, {"ES256"}),
    ({"kty": "EC", "crv": "P-384", "alg": "ES256"}, set()),  # alg that does not fit the curve
    ({"kty": "EC", "crv": "P-521"}, set()),               # ES512 not in this allow-list
    ({"kty": "OKP", "crv": "Ed25519"}, {"EdDSA"}),
    ({"kty": "oct", "alg": "HS256"}, set()),              # HMAC: never
    ({"kty": "oct"}, set()),
    ({"kty": "RSA", "alg": "none"}, set()),
    ({"kty": "RSA", "alg": "HS256"}, set()),
    ({"kty": "RSA", "use": "enc"}, set()),                # an encryption key verifies nothing
])
def test_key_algorithms(jwk, expected):
    assert key_algorithms(jwk, ALLOW) == frozenset(expected)


def test_parse_key_set_keeps_usable_keys():
    rsa, ec = SigningKey.rsa("r"), SigningKey.ec("e")
    keys = parse_key_set({"keys": [rsa.jwk(), ec.jwk(), {"kty": "oct", "k": "c2VjcmV0", "kid": "h"}]}, ALLOW)
    assert {(key.kid, key.algorithms) for key in keys} == {("r", frozenset({"RS256"})), ("e", frozenset({"ES256"}))}


@pytest.mark.parametrize("document, cause", [
    ([], INVALID_DATA), ({"nokeys": []}, INVALID_DATA), ({"keys": "x"}, INVALID_DATA),
    ({"keys": []}, MALFORMED), ({"keys": [{"kty": "RSA", "n": "bad"}]}, MALFORMED),
    ({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}, MALFORMED),
])
def test_bad_key_sets(document, cause):
    with pytest.raises(KeySetUnavailable) as caught:
        parse_key_set(document, ALLOW)
    assert caught.value.cause == cause
