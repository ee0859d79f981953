"""`POST /v1/responses/compact` (issue 27): one more adapter of the turn runner.

The request (`compaction/window.py`) becomes a `store: false` Responses turn asking the
model for a summary of the window; `TurnService.prepare` resolves it like any turn
(validation, quota admission, the chain's owner, the model, the backend) and the runner
runs and settles it, so the summary is charged to the caller like any turn. The summary
is sealed for the caller (`compaction/seal.py`) and returned in a `response.compaction`
object. Without configured keys the endpoint is 501; a body over
`response_compaction.max_input_bytes` is 413 before it is read."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from gateway.compaction.seal import CompactionSeal
from gateway.compaction.window import compacted, parse_compact_request, summary_turn
from gateway.config import Configuration
from gateway.http.responses_io import identity, json_response
from gateway.http.services import SERVICES
from gateway.legacy.stream import answer_text, failure
from gateway.schema.errors import ApiError, body_too_large
from gateway.schema.json_body import parse_json_body
from gateway.schema.json_types import JsonObject
from gateway.storage.conversations import ConversationRepository
from gateway.turns.content import read_content
from gateway.turns.run import BodySink

SEAL: web.AppKey[CompactionSeal] = web.AppKey("compaction_seal", CompactionSeal)
# The most turns of a chain whose user messages the answer lists (the summary covers all).
MAX_CHAIN_TURNS = 1000


class _Body(BodySink):
    def __init__(self) -> None:
        self.response: dict[str, Any] = {}

    async def body(self, response: JsonObject) -> None:
        self.response = response


async def _read_capped(request: web.Request, limit: int) -> bytes:
    if request.content_length is not None and request.content_length > limit:
        raise body_too_large(limit)
    body = await request.read()
    if len(body) > limit:
        raise body_too_large(limit)
    return body


async def chain_questions(conversations: ConversationRepository, response_id: str | None) -> list[str]:
    """The user text of each recorded turn of the chain that ends at `response_id`,
    oldest first, from the gateway's own turn store (both backends record every stored
    turn's question there; `prepare()` has checked the caller owns the chain)."""
    questions: list[str] = []
    for _ in range(MAX_CHAIN_TURNS):
        found = await conversations.find_turn(response_id) if response_id else None
        if found is None:
            break
        question = read_content(await conversations.content(found[0].response_id))[0]
        if question:
            questions.append(question)
        # A fork's first turn starts a conversation: its chain goes on where it forked.
        response_id = found[0].prior_response_id or found[0].previous_response_id
    return questions[::-1]


async def compact_response(request: web.Request) -> web.Response:
    seal = request.app[SEAL]   # its keys: configured, or generated once (gateway/compaction/keys.py)
    services, caller = request.app[SERVICES], identity(request)
    settings = services.config.response_compaction
    compact = parse_compact_request(parse_json_body(await _read_capped(request, settings.max_input_bytes),
                                                    services.config.service.max_json_items))
    sink = _Body()
    turn = await services.turns.prepare(caller, summary_turn(compact, settings.prompt), request.headers,
                                        server_prompt="")
    await services.turns.run(turn, sink)
    if turn.plan.blocked is not None:   # a question-validity shield's answer is no summary to seal
        raise ApiError(400, "Compaction refused", "A shield refused the conversation to compact.",
                       code="question_blocked", param="input")
    error = failure(str(sink.response.get("status")), sink.response, turn.plan.model.id)
    if error is not None:
        raise error
    summary = answer_text(sink.response).strip()
    if not summary:
        raise ApiError(500, "Compaction failed", "The model returned no summary.", code="compaction_failed")
    earlier = await chain_questions(services.conversations, compact.previous_response_id)
    return json_response(compacted(compact, seal.seal(caller.user_id, summary), sink.response.get("usage"), earlier))


def add_routes(app: web.Application, prefix: str, config: Configuration) -> None:
    if SEAL not in app:
        app[SEAL] = CompactionSeal(config.response_compaction.keys)
    app.router.add_post(f"{prefix}/v1/responses/compact", compact_response)
