"""`jwk-token`: the bearer is a JWT verified against the key set at `jwk_config.url`.

The algorithm comes from the key, never from the token alone: a token is verified only
with keys whose allowed algorithms (`jwks.key_algorithms`) include the one its header
names, so `alg: none`, HMAC signed with a public key, or an RSA key used as an EC key
all find no key. A token without `kid` is tried against every key its algorithm allows.

A token without `exp` is refused unless `require_exp: false` (LCORE accepts it).

Verified tokens are remembered by their SHA-256 until the earlier of their `exp` and
`verified_token_cache_seconds`, and forgotten when the key set changes: a busy client
does not pay a signature check per request."""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any, Mapping

import jwt
from jwt.types import Options

from gateway.config.auth import AuthenticationConfig
from gateway.identity import Identity
from gateway.identity.jwks import JwksCache, KeySetUnavailable, VerificationKey
from gateway.identity.noop_with_token import bearer_token
from gateway.schema.errors import ApiError, unauthorized

log = logging.getLogger("gateway.identity.jwk")

# Bound on remembered tokens: past it the oldest entries go first.
_VERIFIED_MAX = 50_000


def _refused(cause: str, reason: str | None = None) -> ApiError:
    if reason is not None:
        log.info("jwk-token: token refused: %s", reason)
    return unauthorized(cause)


class JwkTokenAuthenticator:
    credential_header = "Authorization"

    def __init__(self, config: AuthenticationConfig):
        assert config.jwk_config is not None  # the configuration requires it for this module
        self._config = config.jwk_config
        self._claims = config.jwk_config.jwt_configuration
        self.jwks = JwksCache(config.jwk_config)
        self._verified: dict[bytes, tuple[float, Identity]] = {}
        self._verified_version = 0
        self._decode_options: Options = {"verify_aud": config.jwk_config.audience is not None,
                                "require": ["exp"] if config.jwk_config.require_exp else []}

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        token = bearer_token(headers)
        ttl = self._config.verified_token_cache_seconds
        if not ttl:
            return (await self._verify(token))[0]
        if self.jwks.version != self._verified_version:
            self._verified.clear()
            self._verified_version = self.jwks.version
        digest = hashlib.sha256(token.encode()).digest()
        now = time.time()
        hit = self._verified.get(digest)
        if hit is not None:
            if hit[0] > now:
                return hit[1]
            del self._verified[digest]
        identity, expires = await self._verify(token)
        if self.jwks.version != self._verified_version:  # the set changed while verifying
            return identity
        if len(self._verified) >= _VERIFIED_MAX:
            del self._verified[next(iter(self._verified))]
        self._verified[digest] = (min(now + ttl, expires if expires is not None else now + ttl), identity)
        return identity

    async def _verify(self, token: str) -> tuple[Identity, float | None]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError as exc:
            raise _refused("Token could not be decoded", str(exc)) from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or (kid is not None and not isinstance(kid, str)):
            raise _refused("Token format error", "alg or kid is not a string")
        try:
            keys = await self.jwks.keys()
            candidates = _candidates(keys, kid, alg)
            if not candidates and kid is not None and all(key.kid != kid for key in keys):
                refetched = await self.jwks.refetch_for_unknown_kid()
                if refetched is not None:
                    candidates = _candidates(refetched, kid, alg)
        except KeySetUnavailable as exc:
            raise _refused(exc.cause) from None
        if not candidates:
            raise _refused("Token signed by unknown key", f"no key with kid {kid!r} allows {alg!r}")
        claims = self._decode(token, alg, candidates)
        identity = Identity(user_id=self._claim(claims, self._claims.user_id_claim),
                            username=self._claim(claims, self._claims.username_claim),
                            token=token, skip_userid_check=False, document=claims)
        expires = claims.get("exp")
        return identity, float(expires) if isinstance(expires, (int, float)) else None

    def _decode(self, token: str, alg: str, candidates: list[VerificationKey]) -> dict[str, Any]:
        config = self._config
        for key in candidates:
            try:
                return jwt.decode(token, key.key, algorithms=[alg], audience=config.audience, issuer=config.issuer,
                                  leeway=config.leeway_seconds, options=self._decode_options)
            except jwt.InvalidSignatureError:
                continue  # without a kid, another key of the set may have signed it
            except jwt.ExpiredSignatureError:
                raise _refused("Token has expired") from None
            except jwt.DecodeError as exc:
                raise _refused("Token could not be decoded", str(exc)) from None
            except jwt.InvalidTokenError as exc:
                if isinstance(exc, jwt.MissingRequiredClaimError) and exc.claim == "exp":  # `require_exp`
                    raise _refused("Token missing claim: exp") from None
                # nbf, iat, iss, aud: LCORE has no cause for these; the reason goes to the log.
                raise _refused("Token validation failed", f"{exc.__class__.__name__}: {exc}") from None
        raise _refused("Invalid token signature", "the signature does not verify")

    @staticmethod
    def _claim(claims: dict[str, Any], name: str) -> str:
        value = claims.get(name)
        if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
            raise _refused(f"Token missing claim: {name}")
        return str(value)

    async def close(self) -> None:
        await self.jwks.close()


def _candidates(keys: tuple[VerificationKey, ...], kid: str | None, alg: str) -> list[VerificationKey]:
    return [key for key in keys if alg in key.algorithms and (kid is None or key.kid == kid)]
