"""LCORE's rlsapi v1 `POST /v1/infer`: the RHEL command-line assistant's stateless
question. An adapter of the one turn runner: the request (`legacy/infer.py`) becomes a
Responses request that is not stored (`store: false`, no conversation, no topic
summary) and offers the configured MCP servers only; the system prompt is the
operator's rendered as a sandboxed template (`legacy/infer_prompt.py`); the quota is
admitted and charged to `rlsapi_v1.quota_subject`, or not checked without one (LCORE)."""

from __future__ import annotations

import uuid
from typing import Any

from aiohttp import web

from gateway.config import Configuration
from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES
from gateway.identity import Identity
from gateway.legacy.infer import InferRequest, infer_response, input_source, parse_infer_request
from gateway.legacy.infer_prompt import InferPrompt
from gateway.legacy.stream import failure
from gateway.schema.errors import ApiError
from gateway.schema.json_types import JsonObject
from gateway.turns.run import BodySink

PROMPT: web.AppKey[InferPrompt] = web.AppKey("infer_prompt", InferPrompt)
# LCORE's cause when the inference backend cannot be reached (its response names the backend).
BACKEND_UNREACHABLE = "Unable to connect to the inference backend"


def quota_subject(config: Configuration, caller: Identity) -> str | None:
    """Whose balance the inference uses (LCORE's `_resolve_quota_subject`): None without
    `rlsapi_v1.quota_subject`; `org_id` and `system_id` (the system's `cn`) read from the
    rh-identity document, the user id when there is none (another module, or a field
    the identity lacks)."""
    subject = config.rlsapi_v1.quota_subject
    if subject is None or subject == "user_id":
        return None if subject is None else caller.user_id
    document = caller.document if config.authentication.module == "rh-identity" else None
    found: Any = (document or {}).get("identity") if isinstance(document, dict) else None
    if isinstance(found, dict):
        found = found.get("org_id") if subject == "org_id" else (found.get("system") or {}).get("cn")
    return found if isinstance(found, str) and found else caller.user_id


def _raw(request: InferRequest, servers: dict[str, str]) -> dict[str, Any]:
    return {"input": input_source(request), "stream": False, "store": False, "generate_topic_summary": False,
            "tools": [{"type": "mcp", "server_label": label, "server_url": url} for label, url in servers.items()]}


class _Body(BodySink):
    def __init__(self) -> None:
        self.response: dict[str, Any] = {}

    async def body(self, response: JsonObject) -> None:
        self.response = response


def _unreachable(exc: ApiError) -> ApiError:
    """LCORE's 503 of this endpoint: the same response, its own cause."""
    return ApiError(503, exc.response, BACKEND_UNREACHABLE, code=exc.code)


async def infer(request: web.Request) -> web.Response:
    infer_request = parse_infer_request(await read_json(request))
    services, caller = request.app[SERVICES], identity(request)
    config = services.config
    tools = services.tools
    systeminfo = infer_request.context.systeminfo
    instructions = request.app[PROMPT].render(systeminfo.os, systeminfo.version, systeminfo.arch)
    sink = _Body()
    try:
        turn = await services.turns.prepare(caller, _raw(infer_request, tools.usable_servers(caller, request.headers)),
                                            request.headers, quota_subject=quota_subject(config, caller),
                                            server_prompt=instructions)
        await services.turns.run(turn, sink)
    except ApiError as exc:
        if exc.status == 503 and exc.code == "upstream_unavailable":
            raise _unreachable(exc) from None
        raise
    error = failure(str(sink.response.get("status")), sink.response, turn.plan.model.id)
    if error is not None:
        raise error
    # A blocked question is LCORE's minimal answer, whatever was asked.
    verbose = config.rlsapi_v1.allow_verbose_infer and infer_request.include_metadata and turn.plan.blocked is None
    return json_response(infer_response(str(uuid.uuid4()), sink.response, verbose))


def add_routes(app: web.Application, prefix: str, config: Configuration) -> None:
    if PROMPT not in app:
        app[PROMPT] = InferPrompt(config.customization.default_system_prompt)
    app.router.add_post(f"{prefix}/v1/infer", infer)
