"""Writing SSE bodies, with the pacing knobs, and waiting out a hung client."""

from __future__ import annotations

import asyncio

from aiohttp import web

from .state import STATE, STREAMING

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
_POLL_S = 0.05


async def start(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(status=200, headers={"Content-Type": SSE_CONTENT_TYPE})
    # Counted until the handler returns (the middleware decrements it).
    request[STREAMING] = True
    request.app[STATE].open_streams += 1
    await resp.prepare(request)
    return resp


async def write_frames(resp: web.StreamResponse, frames: list[bytes], delay_s: float,
                       *, pause_first: bool = False) -> bool:
    """Write frames; one write for the whole burst when there is no delay.

    Returns False when the client went away (the caller then stops quietly).
    """
    try:
        if not delay_s:
            if frames:
                await resp.write(frames[0] if len(frames) == 1 else b"".join(frames))
            return True
        for i, data in enumerate(frames):
            if i or pause_first:
                await asyncio.sleep(delay_s)
            await resp.write(data)
        return True
    except (ConnectionError, RuntimeError):
        # ClientConnectionResetError (a ConnectionResetError) or "transport closed".
        return False


async def finish(resp: web.StreamResponse) -> None:
    try:
        await resp.write_eof()
    except (ConnectionError, RuntimeError):
        pass


async def wait_for_disconnect(request: web.Request) -> None:
    """Sleep until the client closes the connection (the hang/stall triggers).

    aiohttp does not cancel handlers on disconnect by default, so poll the transport.
    """
    while True:
        transport = request.transport
        if transport is None or transport.is_closing():
            return
        await asyncio.sleep(_POLL_S)
