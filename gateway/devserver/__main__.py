"""`python -m gateway.devserver`: run the scripted upstream until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys

from aiohttp import web

from .app import create_app


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gateway.devserver",
                                     description="Deterministic scripted upstream "
                                                 "(Chat Completions + Llama Stack stand-in).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=18000, help="0 picks a free port")
    parser.add_argument("--no-responses", action="store_true",
                        help="Chat-Completions-only server: no /v1/responses*, "
                             "/v1/conversations*, /v1/inspect/routes")
    parser.add_argument("--no-conversations", action="store_true",
                        help="Responses server without a Conversations API")
    parser.add_argument("--delay-ms", type=float, default=0.0,
                        help="sleep between stream events and before JSON answers")
    parser.add_argument("--dialect", choices=("llama-stack", "openai"), default="llama-stack",
                        help="frame /v1/responses streams as Llama Stack (data lines, type last) or "
                             "OpenAI (event: lines, type first); the scripted_dialect knob overrides it")
    parser.add_argument("--chat-deltas", type=int, default=None, metavar="N",
                        help="every chat completion stream's text in N pieces (the scripted_deltas knob "
                             "for callers that do not forward metadata, like Llama Stack)")
    parser.add_argument("--provider-ids", action="store_true",
                        help="list the models as Llama Stack names them: scripted/scripted-chat, "
                             "the provider in custom_metadata")
    parser.add_argument("--llama-stack-items", action="store_true",
                        help="conversation items as Llama Stack 0.7.3 keeps them: timed in whole seconds "
                             "(add-items: now + index) and read back in that order, a turn's input "
                             "messages with their string content, a later turn reading the last turn's "
                             "messages and not the items added since")
    parser.add_argument("--log", default=os.environ.get("SCRIPTED_LOG") or None,
                        metavar="FILE", help="append every request as a JSON line "
                                             "(default: $SCRIPTED_LOG)")
    parser.add_argument("--no-record", action="store_true",
                        help="do not keep requests for GET /_scripted/requests")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    app = create_app(responses=not args.no_responses, conversations=not args.no_conversations,
                     delay_ms=args.delay_ms, record=not args.no_record, log_path=args.log,
                     dialect=args.dialect, chat_deltas=args.chat_deltas,
                     llama_stack_items=args.llama_stack_items, provider_ids=args.provider_ids)
    # No access log: the benchmark sends thousands of requests per second.
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=1024)
    await site.start()
    port = args.port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        port = server.sockets[0].getsockname()[1]
    print(f"scripted upstream listening on http://{args.host}:{port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        import uvloop  # optional: faster event loop when installed
    except ImportError:
        pass
    else:
        uvloop.install()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
