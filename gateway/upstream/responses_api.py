"""`UpstreamResponses`: the backend that forwards turns to the upstream's /v1/responses
and the upstream calls around a turn (conversations, stored responses)."""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Mapping
from urllib.parse import quote

from multidict import MultiDict

from gateway.schema.errors import ApiError
from gateway.schema.json_types import JsonObject
from gateway.upstream.capabilities import Capabilities
from gateway.upstream.client import UpstreamClient
from gateway.upstream.errors import map_upstream_error
from gateway.upstream.http11 import Exchange, Interrupted, ReadTimeout, TurnDeadline, UpstreamHttpError


class StreamBroken(Exception):
    """The upstream stream failed after it started (timeout, reset): end it as failed.
    `deadline`: the turn's own deadline ended it (the engine charges what it used)."""

    def __init__(self, message: str, deadline: bool = False):
        super().__init__(message)
        self.deadline = deadline


_INPUT_ITEMS_PARAMS = frozenset({"after", "before", "include", "limit", "order"})


class UpstreamResponses:
    def __init__(self, client: UpstreamClient, capabilities: Capabilities):
        self._client = client
        self.capabilities = capabilities

    async def create(self, body: JsonObject, headers: Mapping[str, str], model: str) -> JsonObject:
        reply = await self._client.request_ok("POST", "/v1/responses", json=body, headers=headers, model=model)
        try:
            data = reply.json()
        except ValueError:
            raise ApiError(500, "Internal server error", "The upstream answered with a body that is not JSON.",
                           code="upstream_bad_response") from None
        if not isinstance(data, dict) or data.get("object") != "response":
            raise ApiError(500, "Internal server error", "The upstream answered with something that is not "
                           "a response object.", code="upstream_bad_response")
        return data

    def stream(self, body: JsonObject, headers: Mapping[str, str], model: str) -> "UpstreamStream":
        """`async with backend.stream(...) as chunks`: open the upstream stream (errors
        before its first byte raise `ApiError`), then `async for chunk in chunks`."""
        return UpstreamStream(self._client.open("POST", "/v1/responses", json=body, headers=headers), model,
                              self._client.redact)

    async def create_conversation(self) -> str | None:
        """A new upstream conversation id, or None when the upstream keeps none."""
        known = self.capabilities.conversations_upstream
        if known is False:
            return None
        reply = await self._client.request("POST", "/v1/conversations", json={"metadata": {}})
        if reply.status in (404, 405) and known is None:
            self.capabilities.learn_conversations(False)
            return None
        if not reply.ok:
            raise self._client.error(reply.status, reply.body)
        self.capabilities.learn_conversations(True)
        return str(reply.json()["id"])

    async def append_items(self, conversation_id: str, items: list[JsonObject]) -> None:
        path = f"/v1/conversations/{quote(conversation_id, safe='')}/items"
        await self._client.request_ok("POST", path, json={"items": items})

    # A stored conversation's upstream state (the conversations endpoints). A 503 when
    # the upstream is unreachable (the client raises it); an upstream that no longer
    # has the conversation is not an error: the gateway's record is what the client sees.

    async def reach_conversation(self, upstream_id: str | None) -> None:
        await self._client.request("GET", _conversation_path(upstream_id) if upstream_id else "/v1/models")

    async def rename_conversation(self, upstream_id: str | None, topic_summary: str) -> None:
        if upstream_id is None:
            await self.reach_conversation(None)
            return
        reply = await self._client.request("POST", _conversation_path(upstream_id),
                                           json={"metadata": {"topic_summary": topic_summary}})
        if not reply.ok and reply.status != 404:
            raise self._client.error(reply.status, reply.body)

    async def delete_conversation(self, upstream_id: str | None, response_ids: tuple[str, ...]) -> None:
        """The conversation's items and its stored responses (already gone: fine)."""
        paths = ([_conversation_path(upstream_id)] if upstream_id else []) + [_response_path(rid) for rid in response_ids]
        for path in paths:
            reply = await self._client.request("DELETE", path)
            if not reply.ok and reply.status != 404:
                raise self._client.error(reply.status, reply.body)

    # Stored responses: the caller's ownership is the gateway's to check first.

    async def retrieve(self, response_id: str) -> Any:
        return (await self._client.request_ok("GET", _response_path(response_id))).json()

    async def delete(self, response_id: str) -> bytes:
        return (await self._client.request_ok("DELETE", _response_path(response_id))).body

    async def input_items(self, response_id: str, query: Mapping[str, str]) -> bytes:
        # Only the listing's own parameters go upstream (not `user_id` or anything else).
        params = MultiDict((key, value) for key, value in query.items() if key in _INPUT_ITEMS_PARAMS)
        path = _response_path(response_id) + "/input_items"
        return (await self._client.request_ok("GET", path, params=params)).body


def _conversation_path(conversation_id: str) -> str:
    return f"/v1/conversations/{quote(conversation_id, safe='')}"


def _response_path(response_id: str) -> str:
    return f"/v1/responses/{quote(response_id, safe='')}"


class UpstreamStream:
    """An upstream stream: the context manager that opens and closes it, and the iterator
    of its body as each read delivers it (one client write per read).

    A plain object, not `@asynccontextmanager` or an async generator: those hold two
    generator frames for the stream's life and add layers of coroutine calls to every
    read of a paced stream; this calls the exchange's `readany()` itself."""

    __slots__ = ("_opening", "_model", "_exchange", "_redact")

    def __init__(self, opening: Awaitable[Exchange], model: str, redact: Callable[[str], str] | None = None):
        self._opening: Awaitable[Exchange] | None = opening
        self._model = model
        self._exchange: Exchange | None = None
        self._redact = redact  # the client's (UpstreamClient.redact)

    async def __aenter__(self) -> "UpstreamStream":
        opening, self._opening = self._opening, None
        assert opening is not None   # a stream is entered once
        exchange = self._exchange = await opening
        if exchange.status != 200:
            try:
                body = await exchange.read()
            except UpstreamHttpError:
                body = b""
            exchange.close()
            raise map_upstream_error(exchange.status, body, self._model, self._redact)
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        exchange = self._exchange
        assert exchange is not None
        if exc_type is None and exchange.at_eof:
            exchange.release()
        else:
            exchange.close()  # drops the connection: the upstream sees the client go away at once

    def __aiter__(self) -> "UpstreamStream":
        return self

    async def __anext__(self) -> bytes:
        assert self._exchange is not None
        try:
            chunk = await self._exchange.readany()
        except ReadTimeout:
            raise StreamBroken("The upstream stopped sending events (idle timeout).") from None
        except Interrupted as exc:   # the gateway's own shutdown, not the upstream's fault
            raise StreamBroken(str(exc), isinstance(exc, TurnDeadline)) from None
        except UpstreamHttpError as exc:
            raise StreamBroken(f"The upstream stream broke: {exc}.") from None
        if not chunk:
            raise StopAsyncIteration
        return chunk
