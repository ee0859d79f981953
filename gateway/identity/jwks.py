"""The key set `jwk-token` verifies against: fetched from `jwk_config.url` with the
gateway's own aiohttp client (PyJWT's `PyJWKClient` would block the event loop), parsed
with PyJWT's `PyJWKSet`, cached for `jwks_cache_seconds`.

A token naming a `kid` the set lacks triggers one early refetch, at most once per
`jwks_refetch_min_seconds` whatever the number of such tokens, so a flood of random
`kid`s never becomes a flood of requests to the key server. When the key server is down,
the keys already fetched keep working."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import ssl
import time
from dataclasses import dataclass
from typing import Any, Sequence

import aiohttp
from jwt import PyJWKSet
from jwt.exceptions import PyJWKSetError

from gateway import outbound
from gateway.config.auth import JWT_ALGORITHMS, JwkConfig

log = logging.getLogger("gateway.identity.jwk")

UNREACHABLE = "Unable to reach authentication key server"
INVALID_DATA = "Authentication key server returned invalid data"
MALFORMED = "Authentication keys are malformed"

# Which algorithms each key type can verify; HMAC (`oct`) keys verify nothing: a JWKS is
# public, so a shared secret in it is no secret.
_FAMILIES = {
    "RSA": {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"},
    "OKP": {"EdDSA"},
}
_EC_CURVES = {"P-256": "ES256", "P-384": "ES384", "P-521": "ES512", "secp256k1": "ES256K"}


class KeySetUnavailable(Exception):
    """No key set to verify with; `cause` is LCORE's 401 cause."""

    def __init__(self, cause: str):
        super().__init__(cause)
        self.cause = cause


@dataclass(frozen=True)
class VerificationKey:
    kid: str | None
    key: Any  # a `cryptography` public key
    algorithms: frozenset[str]


def key_algorithms(jwk: dict[str, Any], allowed: Sequence[str]) -> frozenset[str]:
    """The algorithms a key may verify: its own `alg` when it has one (if asymmetric and
    fitting its type), else the configured allow-list narrowed to its `kty`/`crv`."""
    kty: Any = jwk.get("kty")   # the key server's JSON: any type
    fitting = set(_FAMILIES.get(kty, ()))
    if kty == "EC" and jwk.get("crv") in _EC_CURVES:
        fitting = {_EC_CURVES[jwk["crv"]]}
    fitting &= set(JWT_ALGORITHMS)
    if jwk.get("use") not in (None, "sig"):
        return frozenset()
    alg = jwk.get("alg")
    if alg is not None:
        return frozenset({alg} & fitting)
    return frozenset(fitting & set(allowed))


def parse_key_set(data: Any, allowed: Sequence[str]) -> tuple[VerificationKey, ...]:
    """The usable keys of a JWKS document; raises `KeySetUnavailable` with LCORE's cause."""
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise KeySetUnavailable(INVALID_DATA)
    try:
        key_set = PyJWKSet.from_dict(data)
    except PyJWKSetError as exc:
        log.warning("jwk-token: the key set has no usable key (%s)", exc)
        raise KeySetUnavailable(MALFORMED) from None
    keys = []
    for jwk in key_set.keys:
        # The JWK as served (PyJWK keeps it as `_jwk_data`): whether it names its own `alg`
        # is what decides, and PyJWK's `algorithm_name` fills one in when it does not.
        algorithms = key_algorithms(jwk._jwk_data, allowed)
        if algorithms:
            keys.append(VerificationKey(jwk.key_id, jwk.key, algorithms))
        else:
            log.warning("jwk-token: key %r (kty %s, alg %s) is not used: no allowed signature algorithm",
                        jwk.key_id, jwk._jwk_data.get("kty"), jwk._jwk_data.get("alg"))
    if not keys:
        raise KeySetUnavailable(MALFORMED)
    return tuple(keys)


class JwksCache:
    def __init__(self, config: JwkConfig):
        assert config.url is not None   # required by module jwk-token (`AuthenticationConfig._module_block`)
        self._config = config
        self._url: str = config.url
        self._keys: tuple[VerificationKey, ...] | None = None
        self._fingerprint = b""
        self._fetched_at = float("-inf")
        self._attempted_at = float("-inf")
        self._inflight: asyncio.Task[Any] | None = None
        self._last_error = UNREACHABLE
        self._session: aiohttp.ClientSession | None = None
        # Bumped whenever the fetched set differs from the one before: verified tokens
        # cached under the old set are forgotten.
        self.version = 0

    async def keys(self) -> tuple[VerificationKey, ...]:
        now = time.monotonic()
        recently_tried = now - self._attempted_at < self._config.jwks_refetch_min_seconds
        if self._keys is not None and (now - self._fetched_at < self._config.jwks_cache_seconds or recently_tried):
            return self._keys
        if self._keys is None and recently_tried and self._inflight is None:
            # The key server just failed: do not ask it again for every request.
            raise KeySetUnavailable(self._last_error)
        return await self._refresh()

    async def refetch_for_unknown_kid(self) -> tuple[VerificationKey, ...] | None:
        """The key set fetched again, or None when a refetch happened too recently."""
        if time.monotonic() - self._attempted_at < self._config.jwks_refetch_min_seconds:
            if self._inflight is not None:
                return await asyncio.shield(self._inflight)
            return None
        return await self._refresh()

    async def _refresh(self) -> tuple[VerificationKey, ...]:
        # One fetch at a time: concurrent callers wait for the same one.
        if self._inflight is None:
            self._attempted_at = time.monotonic()
            self._inflight = asyncio.ensure_future(self._fetch())
            self._inflight.add_done_callback(self._done)
        return await asyncio.shield(self._inflight)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._inflight = None
        if not task.cancelled():
            task.exception()  # retrieved here so a fetch nobody awaits any more is not reported

    async def _fetch(self) -> tuple[VerificationKey, ...]:
        try:
            data = await self._download()
            keys = parse_key_set(data, self._config.algorithms)
        except KeySetUnavailable as exc:
            self._last_error = exc.cause
            if self._keys is not None:
                log.warning("jwk-token: key set refresh failed (%s); keeping the %d keys fetched before",
                            exc.cause, len(self._keys))
                return self._keys
            raise
        fingerprint = hashlib.sha256(json.dumps(data["keys"], sort_keys=True).encode()).digest()
        if fingerprint != self._fingerprint:
            if self._keys is not None:
                log.info("jwk-token: the key set changed (%d keys)", len(keys))
            self._fingerprint = fingerprint
            self.version += 1
        self._keys = keys
        self._fetched_at = time.monotonic()
        return keys

    async def _download(self) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._config.jwks_timeout_seconds),
                connector=aiohttp.TCPConnector(ssl=self._ssl_context()),
                trace_configs=outbound.trace_configs("jwks fetch"))
        try:
            async with self._session.get(self._url, headers={"Accept": "application/json"}) as reply:
                if reply.status != 200:
                    log.warning("jwk-token: the key server answered HTTP %d", reply.status)
                    raise KeySetUnavailable(UNREACHABLE)
                body = await reply.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            log.warning("jwk-token: cannot fetch the key set from %s: %s", self._url,
                        exc.__class__.__name__ if not str(exc) else exc)
            raise KeySetUnavailable(UNREACHABLE) from None
        try:
            return json.loads(body)
        except ValueError:
            raise KeySetUnavailable(INVALID_DATA) from None

    def _ssl_context(self) -> ssl.SSLContext | bool:
        if not self._url.startswith("https:"):
            return False
        return ssl.create_default_context(cafile=self._config.ca_cert_path)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
