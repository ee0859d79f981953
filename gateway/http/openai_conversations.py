"""OpenAI's Conversations API beside LCORE's on `/v1/conversations` (issue 23): create,
change the metadata, and a conversation's items (list, add, get one, delete one). `GET`
and `DELETE /v1/conversations/{id}` are LCORE's handlers, whose body carries both
audiences' keys (`gateway/http/conversations.py`).

Where the items live follows the conversation: one the upstream keeps (Llama Stack's
conversations API, `llama_stack.conversations: upstream`) has its items there, turns'
included, and these requests are relayed to it; one the gateway keeps (turns chained by
`previous_response_id`: `conversations: gateway`, and the local engine) has the items
clients added in the gateway's database, sent as input on its next turn
(`turns/prepare.py`). Ownership is LCORE's `/v1`: another user's conversation is a 403
unless the caller's roles grant the `*_other_conversations` action the LCORE route
would need; an unknown one a 404.

A `compaction` item (issue 27) is opened for the conversation's owner before anything
is added (a 422 for one that cannot be: `compaction/items.py`). The gateway keeps it
sealed, and opens it again when the next turn takes it; an upstream's conversation gets
its summary as a user message instead (the upstream never reads the gateway's items),
as a turn of that conversation sending the item as input would leave it there.

Where the operator disabled request system prompts
(`customization.disable_query_system_prompt`), a `system` or `developer` message is
refused before anything is added, with LCORE's 422 naming it (`items[N]`): it would be
the next turn's input (`turns/prompts.py`). Every configured redaction shield rewrites
the items' user text before they are kept or relayed (this API names no shields), as
a turn's input is.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from aiohttp import web
from multidict import MultiDict
from pydantic import TypeAdapter

from gateway.compaction.items import has_compaction, open_all
from gateway.config.access import Action
from gateway.conversations import openai
from gateway.http.compact import SEAL
from gateway.http.conversations import owned, path_conversation_id
from gateway.http.responses_io import identity, json_response, read_json
from gateway.http.services import SERVICES, Services
from gateway.legacy.conversations import LCORE_V1
from gateway.schema.conversations import OpenAIConversationCreate, OpenAIConversationUpdate, OpenAIItemsCreate
from gateway.schema.errors import bad_request, not_found
from gateway.schema.ids import new_stored_conversation_id
from gateway.schema.fail_fast import validate
from gateway.turns.prompts import refuse_system_messages
from gateway.storage.conversations import ConversationRecord

_CREATE = TypeAdapter(OpenAIConversationCreate)
_UPDATE = TypeAdapter(OpenAIConversationUpdate)
_ITEMS = TypeAdapter(OpenAIItemsCreate)


async def _body(request: web.Request) -> Any:
    return await read_json(request) if request.can_read_body else {}


def _item_path(upstream_id: str, item_id: str | None = None) -> str:
    path = f"/v1/conversations/{quote(upstream_id, safe='')}/items"
    return path if item_id is None else f"{path}/{quote(item_id, safe='')}"


async def _relay(services: Services, method: str, path: str, **kwargs: Any) -> Any:
    """The upstream's answer to an items request on its conversation (its errors mapped)."""
    return (await services.upstream.request_ok(method, path, **kwargs)).json()


def _item_not_found(item_id: str) -> Exception:
    return not_found("Item", item_id, code="item_not_found", param="item_id")


async def _described(services: Services, record: ConversationRecord) -> openai.Conversation:
    return openai.conversation(record.id, record.created_at, await services.items.metadata(record.id))


async def create_conversation(request: web.Request) -> web.Response:
    create = validate(_CREATE, await _body(request))
    services = request.app[SERVICES]
    caller = identity(request)
    if create.items:
        _within_limit(services, 0, len(create.items))   # before anything is created
        _no_system_messages(services, create.items)
    opened = _opened(request, caller.user_id, create.items) if create.items else None
    upstream_id = await (await services.turns.backend()).create_conversation()
    conversation_id = new_stored_conversation_id(upstream_id)
    now = datetime.now(timezone.utc).isoformat()
    record = ConversationRecord(conversation_id, caller.user_id, upstream_id, now, now, None, None, None, 0, "", False)
    await services.conversations.save(record, None)
    metadata = dict(create.metadata or {})
    await services.items.set_metadata(conversation_id, metadata)
    if create.items:
        await _add(services, record, create.items, opened)
    return json_response(openai.conversation(conversation_id, now, metadata))


def _no_system_messages(services: Services, items: list[dict[str, Any]]) -> None:
    """Where the operator disabled request system prompts, an added `system` or
    `developer` message would be the next turn's: LCORE's 422 naming it, as in a turn."""
    if services.config.customization.disable_query_system_prompt:
        refuse_system_messages(items, "items")


def _opened(request: web.Request, owner: str, raw: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The items with their compaction items opened for the conversation's owner (422
    for one that cannot be), or None when they hold none."""
    return open_all(request.app[SEAL], owner, raw, "items") if has_compaction(raw) else None


async def _add(services: Services, record: ConversationRecord, raw: list[dict[str, Any]],
               opened: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """`opened`: `raw` with its compaction items opened (`_opened`), None without any.
    What is kept or relayed is redacted (the redaction shields, `turns/shields.py`)."""
    if record.upstream_id is not None:
        sent = services.turns.redacted(raw if opened is None else opened)   # the summary, never the item
        relayed = await _relay(services, "POST", _item_path(record.upstream_id),
                               json={"items": [openai.normalized(item) for item in sent]})
        added: list[dict[str, Any]] = relayed["data"]
        return added
    _within_limit(services, await services.items.count(record.id), len(raw))
    items = [openai.new_item(item) for item in services.turns.redacted(raw)]
    await services.items.add(record.id, items, pending=True)
    return items


def _within_limit(services: Services, held: int, added: int) -> None:
    limit = services.config.service.max_conversation_items
    if held + added > limit:
        raise bad_request(f"A conversation holds at most {limit} items (service.max_conversation_items)",
                          param="items", code="too_many_items")


async def update_conversation(request: web.Request) -> web.Response:
    update = validate(_UPDATE, await _body(request))
    conversation_id = path_conversation_id(request)
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.QUERY_OTHERS_CONVERSATIONS, "update")
    if not await services.items.set_metadata(conversation_id, dict(update.metadata)):
        raise not_found("Conversation", conversation_id, code="conversation_not_found", param="conversation_id")
    return json_response(openai.conversation(conversation_id, record.created_at, update.metadata))


async def list_items(request: web.Request) -> web.Response:
    conversation_id = path_conversation_id(request)
    services = request.app[SERVICES]
    after, limit, order = openai.page_query(request.query)
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.READ_OTHERS_CONVERSATIONS, "read")
    if record.upstream_id is not None:
        # Only the listing's own parameters go upstream, validated (`include[]` as given).
        params = MultiDict([("limit", str(limit)), ("order", order), *([("after", after)] if after else []),
                            *(("include[]", value) for value in request.query.getall("include[]", []))])
        return json_response(await _relay(services, "GET", _item_path(record.upstream_id), params=params))
    return json_response(openai.page(await services.items.all(conversation_id), after, limit, order))


async def create_items(request: web.Request) -> web.Response:
    create = validate(_ITEMS, await _body(request))
    conversation_id = path_conversation_id(request)
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.QUERY_OTHERS_CONVERSATIONS, "update")
    _no_system_messages(services, create.items)
    opened = _opened(request, record.user_id, create.items)
    return json_response(openai.item_list(await _add(services, record, create.items, opened)))


async def get_item(request: web.Request) -> web.Response:
    conversation_id = path_conversation_id(request)
    item_id = request.match_info["item_id"]
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.READ_OTHERS_CONVERSATIONS, "read")
    if record.upstream_id is not None:
        return json_response(await _relay(services, "GET", _item_path(record.upstream_id, item_id)))
    item = await services.items.get(conversation_id, item_id)
    if item is None:
        raise _item_not_found(item_id)
    return json_response(item)


async def delete_item(request: web.Request) -> web.Response:
    """Answers the conversation (OpenAI's)."""
    conversation_id = path_conversation_id(request)
    item_id = request.match_info["item_id"]
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.QUERY_OTHERS_CONVERSATIONS, "update")
    if record.upstream_id is not None:
        await _relay(services, "DELETE", _item_path(record.upstream_id, item_id))
    elif not await services.items.delete(conversation_id, item_id):
        raise _item_not_found(item_id)
    return json_response(await _described(services, record))


def add_routes(app: web.Application, prefix: str) -> None:
    base = f"{prefix}/v1/conversations"
    one = f"{base}/{{conversation_id}}"
    app.router.add_post(base, create_conversation)
    app.router.add_post(one, update_conversation)
    app.router.add_get(f"{one}/items", list_items)
    app.router.add_post(f"{one}/items", create_items)
    app.router.add_get(f"{one}/items/{{item_id}}", get_item)
    app.router.add_delete(f"{one}/items/{{item_id}}", delete_item)
