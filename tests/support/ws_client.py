"""A WebSocket client for end-to-end tests of `/v1/responses` over a WebSocket
(issue 26): aiohttp's client on `gateway serve`, every server message validated against
the `openai` package's WebSocket server events and `openai.types.responses`."""

from __future__ import annotations

import typing
from typing import Any

import aiohttp
import orjson
from openai.types.responses.responses_server_event import ResponsesServerEvent

from tests.support.openai_shapes import validate_event

_union = typing.get_args(ResponsesServerEvent)[0]
SERVER_EVENTS = {literal: cls for cls in typing.get_args(_union)
                 for literal in typing.get_args(cls.model_fields["type"].annotation)}
TERMINAL = {"response.completed", "response.failed", "response.incomplete", "error"}


def checked(message: dict[str, Any]) -> dict[str, Any]:
    """A server message, validated against the package's WebSocket server events (and a
    stream event also against `openai.types.responses`, as every SSE event is)."""
    shown = {**message, "response": {k: v for k, v in message["response"].items() if k != "conversation"}} \
        if isinstance(message.get("response"), dict) else message
    SERVER_EVENTS[message["type"]].model_validate(shown)
    if message["type"].startswith("response.") and not message["type"].startswith("response.steer"):
        validate_event(message)
    return message


class Socket:
    """aiohttp's client on the gateway's WebSocket, collecting checked messages."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws = ws

    async def send(self, message: dict[str, Any] | str) -> None:
        await self.ws.send_str(message if isinstance(message, str) else orjson.dumps(message).decode())

    async def next(self, timeout: float = 15) -> dict[str, Any]:
        message = await self.ws.receive(timeout)
        assert message.type is aiohttp.WSMsgType.TEXT, (message.type, message.data, message.extra)
        return checked(orjson.loads(message.data))

    async def turn(self, timeout: float = 15) -> list[dict[str, Any]]:
        """The messages of one turn, up to its terminal event or error."""
        events = []
        while True:
            events.append(await self.next(timeout))
            if events[-1]["type"] in TERMINAL:
                return events


async def opened(gateway, headers: dict[str, str] | None = None, query: str = "", **kwargs: Any):
    session = aiohttp.ClientSession()
    ws = await session.ws_connect(f"ws://127.0.0.1:{gateway.port}/v1/responses{query}", headers=headers, **kwargs)
    return session, Socket(ws)


class connected:
    def __init__(self, gateway, headers: dict[str, str] | None = None, query: str = ""):
        self._gateway, self._headers, self._query = gateway, headers, query

    async def __aenter__(self) -> Socket:
        self._session, self._socket = await opened(self._gateway, self._headers, self._query)
        return self._socket

    async def __aexit__(self, *exc: Any) -> None:
        await self._socket.ws.close()
        await self._session.close()


def create(text: str, **fields: Any) -> dict[str, Any]:
    return {"type": "response.create", "input": text, **fields}


def text_of(events: list[dict[str, Any]]) -> str:
    return events[-1]["response"]["output"][-1]["content"][0]["text"]
