"""Server options, knobs, recording, routing, and the command line."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.request

import pytest

from gateway.devserver import chat as devserver_chat
from gateway.devserver import create_app
from gateway.devserver import responses as devserver_responses
from gateway.devserver import sse as devserver_sse

from .helpers import CHAT, check_sequence, fixture_text, sse_events


async def test_scripted_deltas_knob(client):
    for n in (1, 5, 300):
        resp = await client.post("/v1/responses", json={
            "model": CHAT, "input": "Hello", "stream": True,
            "metadata": {"scripted_deltas": str(n)}})
        events = sse_events(await resp.text())
        deltas = [e["delta"] for e in events if e["type"] == "response.output_text.delta"]
        assert len(deltas) == n
        final = events[-1]["response"]
        assert final["output"][0]["content"][0]["text"] == "".join(deltas)
        assert final["usage"]["output_tokens"] == len("".join(deltas).split())
        assert final["metadata"] == {"scripted_deltas": str(n)}
        check_sequence(events)
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "Hello", "metadata": {"scripted_deltas": "50"}})
    text = (await resp.json())["output"][0]["content"][0]["text"]
    assert text.startswith("Scripted reply (turn 1, 1 messages): Hello ")
    assert len(text.split()) == 50


class HeldPauses:
    """Stands in for `asyncio.sleep` inside the scripted upstream: every pause is recorded
    and held until the test releases it, so pacing is checked by the order of events
    (a frame arrives while the pause after it is still held), not by the clock."""

    def __init__(self) -> None:
        self._pending: asyncio.Queue[tuple[float, asyncio.Event]] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        released = asyncio.Event()
        self._pending.put_nowait((seconds, released))
        await released.wait()

    async def next(self) -> tuple[float, asyncio.Event]:
        """The next pause the server is held in: (seconds asked for, event releasing it)."""
        return await asyncio.wait_for(self._pending.get(), 10)

    def __getattr__(self, name: str):
        return getattr(asyncio, name)  # everything else is the real asyncio


@pytest.fixture
def held_pauses(monkeypatch) -> HeldPauses:
    held = HeldPauses()
    for module in (devserver_sse, devserver_responses, devserver_chat):
        monkeypatch.setattr(module, "asyncio", held)
    return held


async def read_paced(resp, held: HeldPauses, last: bytes) -> tuple[list[bytes], list[float]]:
    """Read the SSE frames one by one; after each frame but the one ending with `last`,
    the server must be held in a pause (released here). Returns the frames and pauses."""
    frames, pauses = [], []
    while True:
        frame = await asyncio.wait_for(resp.content.readuntil(b"\n\n"), 10)
        frames.append(frame)
        if frame.endswith(last):
            break
        seconds, release = await held.next()  # frame arrived before the pause ended
        pauses.append(seconds)
        release.set()
    assert await resp.content.read() == b""  # nothing after the last frame
    return frames, pauses


async def test_scripted_delay_ms_knob(client, held_pauses):
    resp = await client.post("/v1/responses", json={
        "model": CHAT, "input": "Hi", "stream": True,
        "metadata": {"scripted_deltas": "3", "scripted_delay_ms": "40"}})
    assert resp.status == 200
    frames, pauses = await read_paced(resp, held_pauses, b'"type":"response.completed"}\n\n')
    # created, in_progress, added, part, 3 deltas, done x2, completed: a pause between each.
    events = sse_events(b"".join(frames).decode())
    assert [e["type"] for e in events][-1] == "response.completed" and len(events) == 10
    assert pauses == [0.04] * 9
    pending = asyncio.ensure_future(client.post("/v1/responses", json={
        "model": CHAT, "input": "Hi", "metadata": {"scripted_delay_ms": "100"}}))
    seconds, release = await held_pauses.next()
    assert seconds == 0.1 and not pending.done()  # no answer while the pause is held
    release.set()
    assert (await pending).status == 200


async def test_server_wide_delay(aiohttp_client, held_pauses):
    client = await aiohttp_client(create_app(delay_ms=30))
    resp = await client.post("/v1/chat/completions", json={
        "model": "scripted-chat", "stream": True,
        "messages": [{"role": "user", "content": "one two"}]})
    frames, pauses = await read_paced(resp, held_pauses, b"data: [DONE]\n\n")
    assert len(frames) == 11  # role, 8 words ("Scripted reply (turn 1, 1 messages): one two"), finish, [DONE]
    assert pauses == [0.03] * 10


async def test_no_responses_mode(aiohttp_client):
    client = await aiohttp_client(create_app(responses=False))
    for method, path in (("POST", "/v1/responses"), ("GET", "/v1/responses/resp_x"),
                         ("GET", "/v1/inspect/routes"), ("POST", "/v1/conversations"),
                         ("GET", "/v1/conversations/conv_" + "0" * 48)):
        resp = await client.request(method, path, json={})
        assert resp.status == 404, path
        assert await resp.json() == {"detail": "Not Found"}
    resp = await client.post("/v1/chat/completions", json={
        "model": "scripted-chat", "messages": [{"role": "user", "content": "hi"}]})
    assert resp.status == 200
    # Its model list is a plain OpenAI-compatible server's: chat models, no custom_metadata.
    models = (await (await client.get("/v1/models")).json())["data"]
    assert [(m["id"], "custom_metadata" in m) for m in models] == [("scripted-chat", False), ("scripted-mini", False)]


async def test_no_conversations_mode(aiohttp_client):
    client = await aiohttp_client(create_app(conversations=False))
    resp = await client.post("/v1/conversations", json={})
    assert resp.status == 404 and await resp.json() == {"detail": "Not Found"}
    resp = await client.post("/v1/responses", json={"model": CHAT, "input": "hi"})
    assert resp.status == 200
    routes = (await (await client.get("/v1/inspect/routes")).json())["data"]
    assert not any("conversations" in r["route"] for r in routes)


async def test_inspect_routes(client):
    body = await (await client.get("/v1/inspect/routes")).json()
    recorded = json.loads(fixture_text("inspect-routes.json"))
    assert list(body) == ["data"]
    ours = {(r["route"], r["method"]): r["provider_types"] for r in body["data"]}
    theirs = {(r["route"], r["method"]): r["provider_types"] for r in recorded["data"]}
    assert ours[("/v1/responses", "POST")] == ["inline::builtin"]
    assert ours[("/v1/chat/completions", "POST")] == ["remote::vllm"]
    for key in ours:
        if key[0] != "/health":
            assert key in theirs, key
    assert ("/v1/conversations/{conversation_id}/items", "GET") in ours


async def test_unknown_path_version_and_method(client):
    resp = await client.get("/v1/nope")
    assert resp.status == 404
    assert await resp.text() == fixture_text("err-unknown-path.json").strip()
    assert await (await client.get("/v1/version")).json() == {"version": "0.7.3"}
    assert (await client.put("/v1/responses")).status == 405


async def test_recording(client):
    await client.post("/v1/responses?x=1", json={"model": CHAT, "input": "recorded"},
                      headers={"X-Test": "yes"})
    await client.get("/v1/models")
    records = await (await client.get("/_scripted/requests")).json()
    assert [(r["method"], r["path"]) for r in records] == [("POST", "/v1/responses"),
                                                          ("GET", "/v1/models")]
    first = records[0]
    assert first["query"] == "x=1"
    assert first["headers"]["x-test"] == "yes"
    assert first["body"] == {"model": CHAT, "input": "recorded"}
    assert records[1]["body"] is None
    assert (await client.delete("/_scripted/requests")).status == 200
    assert await (await client.get("/_scripted/requests")).json() == []


async def test_no_record_and_log_file(aiohttp_client, tmp_path):
    log = tmp_path / "requests.jsonl"
    client = await aiohttp_client(create_app(record=False, log_path=str(log)))
    await client.post("/v1/chat/completions", json={
        "model": "scripted-chat", "messages": [{"role": "user", "content": "logged"}]})
    assert await (await client.get("/_scripted/requests")).json() == []
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == 1
    assert set(lines[0]) == {"ts", "method", "path", "query", "headers", "body"}
    assert lines[0]["body"]["messages"][0]["content"] == "logged"


def test_command_line():
    proc = subprocess.Popen([sys.executable, "-m", "gateway.devserver", "--port", "0",
                             "--no-conversations", "--delay-ms", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("scripted upstream listening on http://127.0.0.1:"), line
        url = line.rsplit(" ", 1)[1]
        with urllib.request.urlopen(url + "/v1/health", timeout=5) as resp:
            assert json.loads(resp.read()) == {"status": "OK"}
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()
    assert proc.returncode == 0


async def test_many_concurrent_streams(client):
    async def one(i):
        resp = await client.post("/v1/responses", json={
            "model": CHAT, "input": f"hello {i}", "stream": True})
        return sse_events(await resp.text())[-1]["response"]["output"][0]["content"][0]["text"]

    texts = await asyncio.gather(*(one(i) for i in range(50)))
    assert texts == [f"Scripted reply (turn 1, 1 messages): hello {i}" for i in range(50)]


async def test_open_counts_follow_client_disconnects(client):
    async def counts():
        return await (await client.get("/_scripted/open")).json()

    assert await counts() == {"open_requests": 0, "open_streams": 0}
    resp = await client.post("/v1/responses", json={"model": CHAT, "input": "stall-stream",
                                                    "stream": True})
    await resp.content.readuntil(b"response.in_progress")
    assert await counts() == {"open_requests": 1, "open_streams": 1}
    resp.close()  # the client goes away: the stalled handler notices and ends
    for _ in range(100):
        if (await counts())["open_streams"] == 0:
            break
        await asyncio.sleep(0.02)
    assert await counts() == {"open_requests": 0, "open_streams": 0}
    assert (await client.get("/_scripted/nope")).status == 404


async def test_moderations_with_scripted_verdicts(aiohttp_client):
    client = await aiohttp_client(create_app(responses=False))  # a chat-only server has it too
    resp = await client.post("/v1/moderations", json={"input": ["all fine", "please flag-me"]})
    body = await resp.json()
    assert resp.status == 200 and body["model"] == "scripted-guard" and body["id"].startswith("modr-")
    assert [result["flagged"] for result in body["results"]] == [False, True]
    assert body["results"][1]["categories"]["violence"] is True
    output_guard = {"model": "scripted-output-guard"}
    texts = ["please flag-me", "Scripted reply (turn 1, 1 messages): please flag-me", "flag-me. Scripted reply"]
    body = await (await client.post("/v1/moderations", json={**output_guard, "input": texts})).json()
    assert [result["flagged"] for result in body["results"]] == [False, True, False]
    resp = await client.post("/v1/moderations", json={"model": "no-such-guard", "input": "x"})
    assert resp.status == 404 and (await resp.json())["error"]["code"] == "model_not_found"
    assert (await client.post("/v1/moderations", json={"input": 3})).status == 400
    assert (await client.post("/v1/moderations", json={"input": "break-moderation"})).status == 200
    assert (await client.post("/v1/moderations", json={"input": "Scripted reply: break-moderation"})).status == 500
