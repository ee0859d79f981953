"""`python -m bench.relay --upstream URL --port N`: the naive relay the gateway is measured against.

What a competent engineer writes in an afternoon on the gateway's own stack (aiohttp,
orjson, uvloop): forward `POST /v1/responses`, parse every event (or the JSON body)
with orjson, add `conversation` to each response object, serialise it again and frame
it with an `event:` line; one client write per upstream read. No validation, storage,
repair or renumbering. The benchmark runs it on the gateway's core, in the same run,
so "the gateway costs less than a naive relay" is a measured statement.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import orjson

NEW_CONVERSATION = "conv_" + "0" * 48
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


def relay_events(rest: bytes, chunk: bytes, conversation: str) -> tuple[bytes, bytes]:
    """The frames of the events `rest + chunk` completes, and what is left over."""
    blocks = (rest + chunk).split(b"\n\n")
    rest = blocks.pop()
    out = []
    for block in blocks:
        for line in block.split(b"\n"):
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                out.append(b"data: [DONE]\n\n")
                continue
            event = orjson.loads(line[6:])
            if isinstance(event.get("response"), dict):
                event["response"]["conversation"] = conversation
            out.append(b"event: %s\ndata: %s\n\n" % (str(event.get("type")).encode(), orjson.dumps(event)))
    return b"".join(out), rest


async def responses(request: Any) -> Any:
    from aiohttp import web  # here, not at the top: `bench.instructions` imports this module under valgrind

    body = await request.read()
    conversation = orjson.loads(body).get("conversation") or NEW_CONVERSATION
    upstream = request.app["upstream"] + "/v1/responses"
    async with request.app["session"].post(upstream, data=body, headers={"Content-Type": "application/json"}) as up:
        if not up.content_type.startswith("text/event-stream"):
            reply = orjson.loads(await up.read())
            if isinstance(reply, dict) and up.status == 200:
                reply["conversation"] = conversation
            return web.Response(body=orjson.dumps(reply), status=up.status, content_type="application/json")
        response = web.StreamResponse(headers=SSE_HEADERS)
        await response.prepare(request)
        rest = b""
        async for chunk in up.content.iter_any():
            frames, rest = relay_events(rest, chunk, conversation)
            if frames:
                await response.write(frames)
        await response.write_eof()
        return response


async def serve(upstream: str, host: str, port: int) -> None:
    import aiohttp
    from aiohttp import web

    app = web.Application()
    app["upstream"] = upstream.rstrip("/")
    app.router.add_post("/v1/responses", responses)
    app.router.add_get("/liveness", lambda request: web.json_response({"alive": True}))

    async def session(app: web.Application):
        app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=4096))
        yield
        await app["session"].close()

    app.cleanup_ctx.append(session)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, backlog=1024).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    try:
        import uvloop
    except ImportError:
        uvloop = None
    runner = uvloop.run if uvloop is not None else asyncio.run
    runner(serve(args.upstream, args.host, args.port))


if __name__ == "__main__":
    main()
