"""LCORE's conversations: `GET /v{1,2}/conversations`, `GET`, `PUT` and `DELETE
/v{1,2}/conversations/{id}`, served from the gateway's own records and turn store.

One handler per path; each does the work once and asks its *audience* for the body
(`gateway/legacy/conversations.py`): LCORE's v1 and v2; on `/v1`, `GET` and `DELETE`
also carry OpenAI's Conversations API's keys (`conversations/openai.py`, issue 23;
its other routes are `http/openai_conversations.py`) unless `service.error_body: lcore`
asks for LCORE's bodies alone. What differs between LCORE's versions is the audience's
too: v1 refuses another user's conversation with 403 unless an action allows it
(`read_`, `delete_`; `PUT` checks `query_other_conversations`, as LCORE does) and, like
LCORE, answers 503 when the upstream is unreachable (reading, renaming); v2 needs
`conversation_cache` (500 without it), knows only the caller's conversations (another
user's is a 404) and never asks the upstream.

The list is newest first (creation), with `limit` and `after` (a conversation id) as
our extension; LCORE's has no order and no pages.
"""

from __future__ import annotations

from functools import partial
from typing import Mapping

from aiohttp import web
from pydantic import TypeAdapter

from gateway.config.access import Action
from gateway.conversations import openai
from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES, Services
from gateway.identity import Identity
from gateway.identity.authorization import may_use_conversation
from gateway.legacy.conversations import LCORE_V1, LCORE_V2, LcoreV1, TurnView
from gateway.schema.conversations import ConversationUpdateRequest
from gateway.schema.errors import cache_unavailable, conversation_forbidden, invalid_conversation_id, not_found
from gateway.schema.ids import normalize_conversation_id
from gateway.schema.validation import request_validation_error, validate
from gateway.storage.conversations import ConversationRecord
from gateway.storage.history import StoredTurn
from gateway.turns.content import read_content

_UPDATE = TypeAdapter(ConversationUpdateRequest)
MAX_LIMIT = 1000


def _services(request: web.Request, audience: LcoreV1) -> Services:
    services = request.app[SERVICES]
    if audience.version == "v2" and not services.config.conversation_cache.configured:
        raise cache_unavailable()
    return services


def path_conversation_id(request: web.Request) -> str:
    """The bare id in the path, or LCORE's 400."""
    given = request.match_info["conversation_id"]
    bare = normalize_conversation_id(given)
    if bare is None:
        raise invalid_conversation_id(given)
    return bare


def shown_id(request: web.Request, bare: str) -> str:
    """The id as the body names it: in the form the path named it in. LCORE's clients
    name the bare ids LCORE gives them and get them back; a client naming the `conv_…`
    form `/v1/responses` gave it (a conversation it named none for) gets that back, so
    the id it compares is byte for byte the one it has (LCORE answers bare for both)."""
    return f"conv_{bare}" if request.match_info["conversation_id"].startswith("conv_") else bare


async def owned(services: Services, caller: Identity, conversation_id: str, audience: LcoreV1,
                 others: Action, verb: str) -> ConversationRecord:
    """The conversation, if the caller may act on it: 404 when there is none; another
    user's is a 403 on v1 (unless `others` is granted) and a 404 on v2."""
    await services.turns.wait_recorded(conversation_id)   # a turn that just ended here is in it
    record = await services.history.get(conversation_id)
    if record is not None and record.user_id != caller.user_id:
        if audience.version == "v2":
            record = None
        elif not may_use_conversation(caller, record.user_id, others):
            raise conversation_forbidden(caller.user_id, conversation_id, verb)
    if record is None:
        raise not_found("Conversation", conversation_id, code="conversation_not_found", param="conversation_id")
    return record


def _both(services: Services, audience: LcoreV1) -> bool:
    """Whether the body also carries OpenAI's keys: on the paths OpenAI's SDK calls
    (`/v1`), unless the operator asked for LCORE's bodies alone."""
    return audience.version == "v1" and services.config.service.error_body == "both"


def _view(turn: StoredTurn) -> TurnView:
    question, answer, items = read_content(turn.content)
    return TurnView(question, answer, items, turn.provider, turn.model, turn.started_at, turn.completed_at)


def _page(query: Mapping[str, str]) -> tuple[int | None, str | None]:
    limit: int | None = None
    if "limit" in query:
        raw = query["limit"]
        try:
            limit = int(raw)
        except ValueError:
            raise request_validation_error([{"type": "int_parsing", "loc": ["query", "limit"], "input": raw,
                                             "msg": "Input should be a valid integer, unable to parse string as "
                                                    "an integer"}]) from None
        if not 1 <= limit <= MAX_LIMIT:
            raise request_validation_error([{"type": "less_than_equal" if limit > MAX_LIMIT else "greater_than_equal",
                                             "loc": ["query", "limit"], "input": raw,
                                             "msg": f"Input should be {'less' if limit > MAX_LIMIT else 'greater'} "
                                                    f"than or equal to {MAX_LIMIT if limit > MAX_LIMIT else 1}",
                                             "ctx": {"le" if limit > MAX_LIMIT else "ge":
                                                     MAX_LIMIT if limit > MAX_LIMIT else 1}}])
    after = query.get("after")
    if after is not None:
        bare = normalize_conversation_id(after)
        if bare is None:
            raise invalid_conversation_id(after)
        after = bare
    return limit, after


async def list_conversations(request: web.Request, audience: LcoreV1) -> web.Response:
    services = _services(request, audience)
    caller = identity(request)
    limit, after = _page(request.query)
    everyone = audience.version == "v1" and Action.LIST_OTHERS_CONVERSATIONS in caller.actions
    rows = await services.history.list(None if everyone else caller.user_id, limit, after)
    return json_response(audience.listing(rows))


async def get_conversation(request: web.Request, audience: LcoreV1) -> web.Response:
    conversation_id = path_conversation_id(request)
    services = _services(request, audience)
    record = await owned(services, identity(request), conversation_id, audience,
                          Action.READ_OTHERS_CONVERSATIONS, "read")
    if audience.version == "v1":
        await (await services.turns.backend()).reach_conversation(record.upstream_id)
    turns = await services.history.turns(conversation_id)
    # None: not created through OpenAI's API (`POST /v1/conversations`).
    metadata = await services.items.metadata(conversation_id) if audience.version == "v1" or not turns else None
    if not turns and metadata is None:
        # A conversation whose only turn failed: LCORE finds no items either. One created
        # empty through OpenAI's API is 200 with an empty `chat_history`.
        raise not_found("Conversation", conversation_id, code="conversation_not_found", param="conversation_id")
    body = audience.conversation(shown_id(request, conversation_id), [_view(turn) for turn in turns])
    if _both(services, audience):
        body = openai.union(openai.conversation(conversation_id, record.created_at, metadata), body)
    return json_response(body)


async def update_conversation(request: web.Request, audience: LcoreV1) -> web.Response:
    update = validate(_UPDATE, await read_json(request))   # FastAPI validates the body first
    conversation_id = path_conversation_id(request)
    services = _services(request, audience)
    record = await owned(services, identity(request), conversation_id, audience,
                          Action.QUERY_OTHERS_CONVERSATIONS, "update")
    if audience.version == "v1":
        await (await services.turns.backend()).rename_conversation(record.upstream_id, update.topic_summary)
    if not await services.history.rename(conversation_id, update.topic_summary):
        raise not_found("Conversation", conversation_id, code="conversation_not_found", param="conversation_id")
    return json_response(audience.updated(shown_id(request, conversation_id)))


async def delete_conversation(request: web.Request, audience: LcoreV1) -> web.Response:
    """200 (LCORE): `deleted` says whether there was one of the caller's to delete. On v1,
    LCORE's 503 when the upstream's part could not reach the upstream: the gateway's row
    is deleted all the same and the upstream's deletion retried (`conversations/forget.py`),
    at once when the client deletes it again."""
    conversation_id = path_conversation_id(request)
    services = _services(request, audience)
    caller = identity(request)
    await services.turns.wait_recorded(conversation_id)   # a turn being recorded would bring it back
    record = await services.history.get(conversation_id)
    if record is not None and record.user_id != caller.user_id:
        if audience.version == "v2":
            record = None   # v2 knows only the caller's conversations
        elif not may_use_conversation(caller, record.user_id, Action.DELETE_OTHERS_CONVERSATIONS):
            raise conversation_forbidden(caller.user_id, conversation_id, "delete")
    forgotten = await services.forgetting.delete(conversation_id) if record is not None else None
    deleted = forgotten is not None
    if deleted:
        services.items.forget(conversation_id)
    if audience.version == "v1":   # v2 is the gateway's store alone, as LCORE's cache is
        unreachable = forgotten.unreachable if forgotten is not None else await services.forgetting.finish(
            conversation_id)
        if unreachable is not None:
            raise unreachable
    body = audience.deleted(shown_id(request, conversation_id), deleted)
    if _both(services, audience):
        body = openai.union(openai.deleted(conversation_id, deleted), body)
    return json_response(body)


def add_routes(app: web.Application, prefix: str) -> None:
    for version, audience in (("v1", LCORE_V1), ("v2", LCORE_V2)):
        base = f"{prefix}/{version}/conversations"
        app.router.add_get(base, partial(list_conversations, audience=audience))
        app.router.add_get(f"{base}/{{conversation_id}}", partial(get_conversation, audience=audience))
        app.router.add_put(f"{base}/{{conversation_id}}", partial(update_conversation, audience=audience))
        app.router.add_delete(f"{base}/{{conversation_id}}", partial(delete_conversation, audience=audience))

