"""`GET /metrics`: this process's metrics in Prometheus's text format, or, as one of a
group of workers (`service.workers`), the group's merged (observability/group.py). Each
replica exposes its own (Prometheus aggregates them); see docs/operating.md."""

from __future__ import annotations

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from gateway.observability.metrics import Metrics

METRICS: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)


async def metrics(request: web.Request) -> web.Response:
    return web.Response(body=request.app[METRICS].exposition.render(),
                        headers={"Content-Type": CONTENT_TYPE_LATEST})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/metrics", metrics)


# Scrapers carry no credential: `authentication.skip_for_metrics` lets them through (LCORE).
METRICS_HANDLERS = frozenset({metrics})
