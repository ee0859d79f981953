"""`GET /v1/models` and `GET /v1/info`."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Any

from aiohttp import web

from gateway.http.responses_io import json_response
from gateway.http.services import SERVICES
from gateway.upstream.catalog import ModelInfo


def gateway_version() -> str:
    try:
        return version("gateway")
    except PackageNotFoundError:
        return "0.0.0"


def _lcore_model(model: ModelInfo) -> dict[str, Any]:
    metadata = {key: value for key, value in (model.raw.get("custom_metadata") or {}).items()
                if key not in ("model_type", "provider_id", "provider_resource_id")}
    return {"identifier": model.id, "metadata": metadata, "api_model_type": model.model_type,
            "provider_id": model.provider_id, "type": "model",
            "provider_resource_id": model.provider_resource_id or model.id, "model_type": model.model_type}


def _openai_model(model: ModelInfo) -> dict[str, Any]:
    return {"object": "model", "created": 0, "owned_by": model.provider_id or "upstream", **model.raw,
            "id": model.id}


async def list_models(request: web.Request) -> web.Response:
    """One body for both clients: LCORE reads `models`, OpenAI SDKs read `data`. Always
    asked of the upstream, so an unreachable one is a 503 here, as in LCORE."""
    models = await request.app[SERVICES].catalog.fresh()
    wanted = request.query.get("model_type")
    if wanted:
        models = [model for model in models if model.model_type == wanted]
    return json_response({"object": "list", "data": [_openai_model(m) for m in models],
                          "models": [_lcore_model(m) for m in models]})


async def info(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    reply = await services.upstream.request("GET", "/v1/version", timeout=10)
    upstream_version = None
    if reply.ok and reply.body.startswith(b"{"):
        upstream_version = reply.json().get("version")
    return json_response({"name": services.config.name, "service_version": gateway_version(),
                          "llama_stack_version": upstream_version})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_get(f"{prefix}/v1/models", list_models)
    app.router.add_get(f"{prefix}/v1/info", info)
