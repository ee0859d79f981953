"""Background responses over HTTP (both modes): create (`POST /v1/responses` with
`background: true`), read (`GET /v1/responses/{id}`: progress, then the final
object), follow or resume (`GET /v1/responses/{id}?stream=true&starting_after=N`) and
cancel (`POST /v1/responses/{id}/cancel`). Each is scoped to the caller: another
user's response is a 404, as a missing one.

A follower in the process that runs the response reads its frames from memory and is
woken by each read; on another replica (PostgreSQL) it polls the recorded events every
`FOLLOW_POLL` until the terminal event.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web

from gateway.background.runs import BackgroundRuns, Run
from gateway.http.client_writes import ClientWrites, client_writes
from gateway.http.responses_io import identity, json_response
from gateway.http.services import SERVICES
from gateway.http.sse import SSE_HEADERS
from gateway.schema.errors import ApiError, invalid_attribute, not_found
from gateway.schema.json_types import JsonObject
from gateway.storage.background_responses import BackgroundRow
from gateway.streaming.enrich import output_text
from gateway.streaming.progress import frames_after, progress
from gateway.streaming.sse import DONE_FRAME
from gateway.turns.run import client_left
from gateway.turns.turn import Turn

log = logging.getLogger("gateway.http")

FOLLOW_POLL = 0.2
CANCEL_WAIT = 10.0   # how long a cancel waits for another replica to stop its run


def _runs(request: web.Request) -> BackgroundRuns:
    return request.app[SERVICES].background


def _shown(response: JsonObject) -> JsonObject:
    shown = {**response, "output_text": output_text(response)}
    shown.setdefault("available_quotas", {})
    return shown


async def create(request: web.Request, turn: Turn) -> web.StreamResponse:
    """Start the turn detached and answer at once: the response as created, or its
    live events (`stream: true`; the turn goes on if this client leaves)."""
    run = await _runs(request).start(turn)
    assert run.id is not None and run.response is not None
    if turn.plan.stream:
        return await _follow_run(request, run, -1)
    return json_response(_shown(run.response))


async def _row(request: web.Request) -> BackgroundRow | None:
    return await _runs(request).store.get(request.match_info["response_id"], identity(request).user_id)


async def _current(runs: BackgroundRuns, row: BackgroundRow) -> dict[str, Any]:
    """The response now: final, or as its recorded events show it so far."""
    if not row.running:
        return row.response
    run = runs.get(row.id)
    batches = [frames for _, frames in run.batches] if run is not None else \
        [frames for _, frames in await runs.store.frames_after(row.id, -1)]
    return progress(row.response, batches)


def _streaming(request: web.Request) -> tuple[bool, int]:
    """`stream` and `starting_after` of a retrieve."""
    stream = request.query.get("stream", "false").lower()
    if stream not in ("true", "false"):
        raise invalid_attribute("stream must be true or false", param="stream")
    raw = request.query.get("starting_after", "-1")
    try:
        after = int(raw)
    except ValueError:
        after = -2
    if after < -1:
        raise invalid_attribute("starting_after must be a sequence number (an integer from 0)",
                                param="starting_after")
    return stream == "true", after


async def retrieve(request: web.Request) -> web.StreamResponse | None:
    """A background response's object or stream; None when the id names no
    background response of the caller (the ordinary retrieve answers)."""
    stream, after = _streaming(request)
    row = await _row(request)
    if row is None:
        if not stream:
            return None
        response_id = request.match_info["response_id"]
        if not await _is_own_response(request, response_id):
            raise not_found("Response", response_id, code="response_not_found")
        raise invalid_attribute("Only background responses can be streamed again "
                                "(create the response with background: true)", param="stream")
    runs = _runs(request)
    if not stream:
        return json_response(_shown(await _current(runs, row)))
    run = runs.get(row.id)
    if run is not None:
        return await _follow_run(request, run, after)
    return await _follow_stored(request, row, after)


async def _open(request: web.Request) -> tuple[web.StreamResponse, ClientWrites]:
    """The follower's stream, its writes bounded: a follower that stops reading is cut
    (http/client_writes.py); the run goes on without it."""
    response = web.StreamResponse(headers={**SSE_HEADERS, "X-Request-ID": request["request_id"]})
    writer = await response.prepare(request)
    return response, client_writes(request, writer, request.app[SERVICES].config.service)


async def _follow_run(request: web.Request, run: Run, after: int) -> web.StreamResponse:
    """Frames after `after` from a run in this process, then live ones, to its end."""
    response, writes = await _open(request)
    try:
        await _relay_run(response, writes, run, after)
    except Exception as exc:
        if not client_left(exc):
            raise
        # The follower left or was cut (it stopped reading): the run goes on without it.
        log.info("the follower of background response %s went away", run.id)
    return response


async def _relay_run(response: web.StreamResponse, writes: ClientWrites, run: Run, after: int) -> None:
    index = 0
    while True:
        batches = run.batches
        while index < len(batches):
            first, frames = batches[index]
            index += 1
            out = frames_after(first, frames, after)
            if out:
                await writes.write(out)
        if run.done:
            break
        await run.changed()
    await writes.eof(DONE_FRAME, response.write_eof)


async def _follow_stored(request: web.Request, row: BackgroundRow, after: int) -> web.StreamResponse:
    """Frames after `after` from the database, polling while another replica runs it."""
    response, writes = await _open(request)
    try:
        await _relay_stored(request, response, writes, row, after)
    except Exception as exc:
        if not client_left(exc):
            raise
        log.info("the follower of background response %s went away", row.id)
    return response


async def _relay_stored(request: web.Request, response: web.StreamResponse, writes: ClientWrites,
                        row: BackgroundRow, after: int) -> None:
    store, user_id = _runs(request).store, identity(request).user_id
    current: BackgroundRow | None = row
    while True:
        for first, frames in await store.frames_after(row.id, after):
            out = frames_after(first, frames, after)
            if out:
                await writes.write(out)
            after = max(after, first + frames.count(b"\n\n") - 1)
        if current is None or not current.running:
            break
        await asyncio.sleep(FOLLOW_POLL)
        current = await store.get(row.id, user_id)
    await writes.eof(DONE_FRAME, response.write_eof)


def _conflict(cause: str) -> ApiError:
    return ApiError(409, "Response cannot be cancelled", cause, code="response_not_cancellable")


async def cancel(request: web.Request) -> web.Response:
    response_id = request.match_info["response_id"]
    row = await _row(request)
    if row is None:
        if await _is_own_response(request, response_id):
            raise _conflict(f"Cannot cancel response '{response_id}': only background responses can be cancelled")
        raise not_found("Response", response_id, code="response_not_found")
    if row.status == "cancelled":
        return json_response(_shown(row.response))  # idempotent, as Llama Stack and OpenAI
    if not row.running:
        raise _conflict(f"Cannot cancel response '{response_id}' with status '{row.status}'")
    runs = _runs(request)
    run = runs.get(response_id)
    if run is not None:
        await runs.cancel(run)
    else:  # run by another replica: it looks for requests every BackgroundWatch.TICK
        await runs.store.request_cancel(response_id)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CANCEL_WAIT
        while row is not None and row.running and loop.time() < deadline:
            await asyncio.sleep(FOLLOW_POLL)
            row = await _row(request)
    row = await _row(request)
    assert row is not None
    return json_response(_shown(await _current(runs, row)))


async def forget(request: web.Request) -> bool:
    """`DELETE /v1/responses/{id}` of a background response: stopped if it runs, and its
    record and events removed. False when the id names no background response of the
    caller."""
    row = await _row(request)
    if row is None:
        return False
    runs = _runs(request)
    if row.running:
        run = runs.get(row.id)
        if run is not None:
            await runs.cancel(run)
        else:
            await runs.store.request_cancel(row.id)
    await runs.store.delete(row.id)
    return True


async def _is_own_response(request: web.Request, response_id: str) -> bool:
    """Whether the id names a (non-background) response of the caller."""
    backend = await request.app[SERVICES].turns.backend()
    return await backend.owns(identity(request), response_id)
