"""OpenAI's Conversations API beside LCORE's on `/v1/conversations` (issue 23): create,
change the metadata, and a conversation's items (list, add, get one, delete one). `GET`
and `DELETE /v1/conversations/{id}` are LCORE's handlers, whose body carries both
audiences' keys (`gateway/http/conversations.py`).

Items clients add are held in the gateway's database, whatever the conversation, and
sent as input, in the order they were added, on its next turn (`turns/prepare.py`).
One the gateway keeps (turns chained by `previous_response_id`: `conversations:
gateway`, and the local engine) keeps them there after that. One the upstream keeps
(Llama Stack's conversations API, `llama_stack.conversations: upstream`) has its turns'
items there, and the turn that sends the held items leaves them there too (issue 41:
Llama Stack 0.7.3 orders items by whole seconds, so items added to it directly within a
few seconds of each other reach the model out of order, and a conversation's later
turns read the last turn's messages, not items added since); its listing is the
upstream's, then the items still held, and reading or deleting one looks among the held
items first. Every item answered is `openai.shaped` into the SDK's `ConversationItem`.
Ownership is LCORE's `/v1`: another user's conversation is a 403 unless the caller's
roles grant the `*_other_conversations` action the LCORE route would need; an unknown
one a 404.

A `compaction` item (issue 27) is opened for the conversation's owner before anything
is added (a 422 for one that cannot be: `compaction/items.py`). The gateway keeps it
sealed, and opens it again when the next turn takes it (an upstream's conversation then
keeps its summary as a user message, as a turn sending the item as input leaves it).

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
from gateway.schema.ids import new_conversation_id, normalize_conversation_id
from gateway.schema.validation import validate
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


async def _described(services: Services, record: ConversationRecord) -> dict[str, Any]:
    return openai.conversation(record.id, record.created_at, await services.items.metadata(record.id))


async def create_conversation(request: web.Request) -> web.Response:
    create = validate(_CREATE, await _body(request))
    services = request.app[SERVICES]
    caller = identity(request)
    if create.items:
        _within_limit(services, 0, len(create.items))   # before anything is created
        _no_system_messages(services, create.items)
    if create.items:
        _check_opens(request, caller.user_id, create.items)
    upstream_id = await (await services.turns.backend()).create_conversation()
    conversation_id = normalize_conversation_id(upstream_id) if upstream_id else new_conversation_id()
    assert conversation_id is not None, "the upstream's conversation ids are conv_<48 hex> or UUIDs"
    now = datetime.now(timezone.utc).isoformat()
    record = ConversationRecord(conversation_id, caller.user_id, upstream_id, now, now, None, None, None, 0, "", False)
    await services.conversations.save(record, None)
    metadata = dict(create.metadata or {})
    await services.items.set_metadata(conversation_id, metadata)
    if create.items:
        await _add(services, record, create.items)
    return json_response(openai.conversation(conversation_id, now, metadata))


def _no_system_messages(services: Services, items: list[dict[str, Any]]) -> None:
    """Where the operator disabled request system prompts, an added `system` or
    `developer` message would be the next turn's: LCORE's 422 naming it, as in a turn."""
    if services.config.customization.disable_query_system_prompt:
        refuse_system_messages(items, "items")


def _check_opens(request: web.Request, owner: str, raw: list[dict[str, Any]]) -> None:
    """Their compaction items open for the conversation's owner (else a 422)."""
    if has_compaction(raw):
        open_all(request.app[SEAL], owner, raw, "items")


async def _add(services: Services, record: ConversationRecord, raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Held for the next turn (pending), redacted (the redaction shields, `turns/shields.py`);
    a compaction item sealed as it came."""
    held = await services.items.count(record.id, pending_only=record.upstream_id is not None)
    _within_limit(services, held, len(raw))
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
        return json_response(await _upstream_page(request, services, record, after, limit, order))
    kept = [openai.shaped(item) for item in await services.items.all(conversation_id)]   # older rows too
    return json_response(openai.page(kept, after, limit, order))


async def _upstream_page(request: web.Request, services: Services, record: ConversationRecord, after: str | None,
                         limit: int, order: str) -> dict[str, Any]:
    """A page of an upstream's conversation: its items, then those the gateway still holds
    for the next turn (newest first: the other way round). The upstream is asked only for
    what the page needs from it."""
    assert record.upstream_id is not None
    held = [openai.shaped(item) for item in await services.items.all(record.id, pending_only=True)]
    held_ids = {item["id"] for item in held}
    if order == "desc" and (after is None or after in held_ids):
        page = openai.page(held, after, limit, "desc")
        if page["has_more"]:
            return page
        taken: list[dict[str, Any]] = page["data"]
        relayed = await _relayed_page(request, services, record.upstream_id, None, max(limit - len(taken), 1), order)
        more = relayed["data"][:limit - len(taken)]
        return openai.item_list(taken + more, has_more=bool(relayed.get("has_more")) or len(more) < len(relayed["data"]))
    if order == "asc" and after is not None and after in held_ids:
        return openai.page(held, after, limit, "asc")
    relayed = await _relayed_page(request, services, record.upstream_id, after, limit, order)
    data: list[dict[str, Any]] = relayed["data"]
    if order == "desc" or relayed.get("has_more") or len(data) >= limit:
        return openai.item_list(data, has_more=bool(relayed.get("has_more")) or (order == "asc" and bool(held)))
    return openai.item_list(data + held[:limit - len(data)], has_more=len(held) > limit - len(data))


async def _relayed_page(request: web.Request, services: Services, upstream_id: str, after: str | None, limit: int,
                        order: str) -> dict[str, Any]:
    # Only the listing's own parameters go upstream, validated (`include[]` as given).
    params = MultiDict([("limit", str(limit)), ("order", order), *([("after", after)] if after else []),
                        *(("include[]", value) for value in request.query.getall("include[]", []))])
    relayed: dict[str, Any] = openai.shaped_list(await _relay(services, "GET", _item_path(upstream_id),
                                                              params=params))
    return relayed


async def create_items(request: web.Request) -> web.Response:
    create = validate(_ITEMS, await _body(request))
    conversation_id = path_conversation_id(request)
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.QUERY_OTHERS_CONVERSATIONS, "update")
    _no_system_messages(services, create.items)
    _check_opens(request, record.user_id, create.items)
    return json_response(openai.item_list(await _add(services, record, create.items)))


async def get_item(request: web.Request) -> web.Response:
    conversation_id = path_conversation_id(request)
    item_id = request.match_info["item_id"]
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.READ_OTHERS_CONVERSATIONS, "read")
    upstream = record.upstream_id
    item = await services.items.get(conversation_id, item_id, pending_only=upstream is not None)
    if item is None and upstream is not None:
        return json_response(openai.shaped(await _relay(services, "GET", _item_path(upstream, item_id))))
    if item is None:
        raise _item_not_found(item_id)
    return json_response(openai.shaped(item))


async def delete_item(request: web.Request) -> web.Response:
    """Answers the conversation (OpenAI's)."""
    conversation_id = path_conversation_id(request)
    item_id = request.match_info["item_id"]
    services = request.app[SERVICES]
    record = await owned(services, identity(request), conversation_id, LCORE_V1,
                          Action.QUERY_OTHERS_CONVERSATIONS, "update")
    upstream = record.upstream_id
    if not await services.items.delete(conversation_id, item_id, pending_only=upstream is not None):
        if upstream is None:
            raise _item_not_found(item_id)
        await _relay(services, "DELETE", _item_path(upstream, item_id))
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
