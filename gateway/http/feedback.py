"""LCORE's feedback endpoints: `POST /v1/feedback`, `GET /v1/feedback/status`
(unauthenticated, as LCORE) and `PUT /v1/feedback/status` (admin). The switch lives in
the database, so every replica answers what the last `PUT` on any of them set."""

from __future__ import annotations

import logging

from aiohttp import web
from pydantic import TypeAdapter

from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES
from gateway.schema.errors import ApiError, conversation_forbidden, not_found
from gateway.schema.feedback import FeedbackRequest, FeedbackStatusUpdateRequest
from gateway.schema.ids import normalize_conversation_id
from gateway.schema.fail_fast import validate

log = logging.getLogger("gateway.http")
_FEEDBACK = TypeAdapter(FeedbackRequest)
_STATUS = TypeAdapter(FeedbackStatusUpdateRequest)


def feedback_disabled() -> ApiError:
    return ApiError(403, "Storing feedback is disabled", "Storing feedback is disabled.", code="feedback_disabled")


async def post_feedback(request: web.Request) -> web.Response:
    services = request.app[SERVICES]
    feedback = services.feedback
    if not await feedback.enabled():   # LCORE's dependency: before the body is looked at
        raise feedback_disabled()
    body = validate(_FEEDBACK, await read_json(request))
    caller = identity(request)
    conversation_id = normalize_conversation_id(body.conversation_id)
    assert conversation_id is not None  # the model checked it
    record = await services.history.get(conversation_id)
    if record is None:
        raise not_found("Conversation", conversation_id, code="conversation_not_found", param="conversation_id")
    if record.user_id != caller.user_id:   # no action overrides it (LCORE)
        raise conversation_forbidden(caller.user_id, conversation_id, "submit feedback for")
    try:
        await feedback.store_feedback(caller.user_id, conversation_id, body.model_dump(mode="json"))
    except OSError as exc:
        log.error("storing feedback failed: %s", exc)
        # LCORE's `feedback_path_invalid`: the operator's directory, named.
        raise ApiError(500, "Failed to store feedback", f"Failed to store feedback at directory: "
                       f"{feedback.directory}", code="feedback_storage_failed") from None
    return json_response({"response": "feedback received"})


async def feedback_status(request: web.Request) -> web.Response:
    enabled = await request.app[SERVICES].feedback.enabled()
    return json_response({"functionality": "feedback", "status": {"enabled": enabled}})


async def update_feedback_status(request: web.Request) -> web.Response:
    body = validate(_STATUS, await read_json(request))
    changed = await request.app[SERVICES].feedback.set_enabled(body.status, identity(request).user_id)
    return json_response({"status": changed})


def add_routes(app: web.Application, prefix: str) -> None:
    app.router.add_post(f"{prefix}/v1/feedback", post_feedback)
    app.router.add_get(f"{prefix}/v1/feedback/status", feedback_status)
    app.router.add_put(f"{prefix}/v1/feedback/status", update_feedback_status)


PUBLIC_HANDLERS = frozenset({feedback_status})
