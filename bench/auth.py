"""The `jwk` workload: what `jwk-token` authentication costs per request.

JSON requests (a new conversation each, as scenario 1) with one RS256 token, against
three gateways started alike for this workload: `noop`, `jwk-token` with
verified tokens cached (the default), and `jwk-token` verifying every signature
(`verified_token_cache_seconds: 0`). The JWKS server is a small aiohttp app in this
process (core 1), fetched once per gateway. Reported: CPU µs per request for each, what
authentication adds over noop, and requests/s over noop's (target ≥ 0.95 with the cache).
"""

from __future__ import annotations

import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from bench import procs, scenarios
from bench.report import Verdict
from bench.scenarios import Run, Settings, Target

MIN_RATE_RATIO = 0.95
VARIANTS = (("noop", None), ("jwk-token, cached", 60), ("jwk-token, uncached", 0))


@dataclass
class AuthRuns:
    runs: dict[str, list[Run]] = field(default_factory=dict)


class _Jwks:
    """One RSA key, served as a JWKS at http://127.0.0.1:<port>/jwks."""

    def __init__(self) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        self.document = {"keys": [{**jwk, "kid": "bench", "alg": "RS256", "use": "sig"}]}
        self.port = procs.free_port()
        self._runner: web.AppRunner | None = None

    async def start(self) -> str:
        async def serve(request: web.Request) -> web.Response:
            return web.json_response(self.document)

        app = web.Application()
        app.router.add_get("/jwks", serve)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return f"http://127.0.0.1:{self.port}/jwks"

    def token(self) -> str:
        now = int(time.time())
        return jwt.encode({"user_id": f"bench-{uuid.uuid4().hex[:8]}", "username": "bench", "iat": now,
                           "exp": now + 3600}, self.key, algorithm="RS256", headers={"kid": "bench"})

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


async def jwk_token(settings: Settings, upstream: procs.Proc, workdir: Path, rounds: int) -> AuthRuns:
    jwks = _Jwks()
    url = await jwks.start()
    token = jwks.token()
    gateways: dict[str, procs.Proc] = {}
    results = AuthRuns()
    try:
        for name, cache in VARIANTS:
            authentication = {"module": "noop"} if cache is None else {
                "module": "jwk-token", "skip_for_health_probes": True,
                "jwk_config": {"url": url, "verified_token_cache_seconds": cache}}
            gateways[name] = procs.start_gateway(workdir, upstream.url, name=f"gateway-auth-{len(gateways)}",
                                                 authentication=authentication)
        for round_ in range(rounds):
            for name, _ in VARIANTS:
                print(f"bench: jwk, {name}, round {round_ + 1}/{rounds}", flush=True)
                run = await scenarios.json_new(settings, Target("gateway", gateways[name]), upstream,
                                               authorization=f"Bearer {token}")
                if run.errors:
                    raise RuntimeError(f"jwk, {name}: {run.errors} requests failed")
                results.runs.setdefault(name, []).append(run)
    finally:
        for proc in gateways.values():
            proc.stop()
        await jwks.stop()
    return results


def render(results: AuthRuns, verdicts: list[Verdict]) -> list[str]:
    def median(name: str, value) -> float:
        return statistics.median(value(run) for run in results.runs[name])

    noop_cpu, noop_rate = median("noop", lambda r: r.cpu_us), median("noop", lambda r: r.rate)
    lines = ["## Authentication: jwk-token (JSON, new conversation, one RS256 token)", "",
             "| gateway | CPU µs per request | added over noop | requests/s | / noop |", "|---|--:|--:|--:|--:|"]
    for name, _ in VARIANTS:
        cpu, rate = median(name, lambda r: r.cpu_us), median(name, lambda r: r.rate)
        added = "—" if name == "noop" else f"{cpu - noop_cpu:+.0f}"
        lines.append(f"| {name} | {cpu:.0f} | {added} | {rate:,.0f} | {rate / noop_rate:.2f}× |")
    # Rates drift with this machine; CPU per request does not, so the verdict is on CPU:
    # noop's CPU over jwk's is the request rate jwk would reach on the same core.
    cached = noop_cpu / median("jwk-token, cached", lambda r: r.cpu_us)
    verdicts.append(Verdict(f"jwk-token (cached) ≥ {MIN_RATE_RATIO}× noop's requests per CPU second",
                            cached >= MIN_RATE_RATIO, f"{cached:.2f}×"))
    return lines + [""]
