"""Background responses through `gateway serve`, in both modes (forward in front of the
scripted Responses upstream; the local engine in front of its Chat Completions), on
SQLite: create, poll, resume from a sequence number after a dropped connection (with
the `openai` SDK), cancel, and what a restart does to an unfinished one."""

from __future__ import annotations

import json
import re
import signal
import socket
import time

import pytest

from gateway.background.runs import FLUSH_LINGER
from tests.support.flows import checked, kinds
from tests.support.gateway_proc import events_of, gateway_config, parse_sse, start_gateway
from tests.support.openai_shapes import replay_through_sdk, validate_event, validate_response
from tests.support.raw_client import open_stream, read_until, reset, wait_until

SLOW = {"scripted_delay_ms": "40", "scripted_deltas": "60"}       # ~2.5 s of text
VERY_SLOW = {"scripted_delay_ms": "100", "scripted_deltas": "300"}  # ~30 s: cancelled long before
SEQUENCE = re.compile(rb'"sequence_number":(\d+)')


def _engine_keys(url: str) -> dict:
    return {"llama_stack": {"url": url, "max_retries": 0, "api": "chat_completions"}}


@pytest.fixture(scope="module", params=["forward", "engine"])
def mode(request, gateway_factory, upstream, chat_upstream):
    """(gateway, its upstream, the upstream path a turn goes to)."""
    if request.param == "forward":
        return gateway_factory(upstream.url), upstream, "/v1/responses"
    return gateway_factory(chat_upstream.url, **_engine_keys(chat_upstream.url)), chat_upstream, \
        "/v1/chat/completions"


def _wait_for(gateway, response_id: str, user: str, done=lambda r: r["status"] not in ("queued", "in_progress")):
    found = {}

    def check() -> bool:
        found["r"] = gateway.get(f"/v1/responses/{response_id}?user_id={user}").ok()
        return done(found["r"])
    wait_until(check, f"{response_id} to be done")
    return found["r"]


def test_create_returns_at_once_then_poll_shows_the_final_object(mode):
    gateway, upstream, path = mode
    upstream.clear()
    created = gateway.post("/v1/responses?user_id=bg-poll", {"input": "Hello in the background", "background": True,
                                                             "metadata": SLOW})
    body = created.ok()
    assert body["status"] in ("queued", "in_progress") and body["background"] is True
    assert body["conversation"].startswith("conv_") and body["output"] == []
    validate_response({k: v for k, v in body.items() if k != "available_quotas"})
    # The gateway runs it: the upstream saw an ordinary streamed turn, never `background`.
    sent = upstream.last(path)["body"]
    assert "background" not in sent and sent["stream"] is True
    during = gateway.get(f"/v1/responses/{body['id']}?user_id=bg-poll").ok()
    assert during["status"] == "in_progress" and during["background"] is True
    final = _wait_for(gateway, body["id"], "bg-poll")
    assert final["status"] == "completed" and final["background"] is True
    assert final["output_text"].startswith("Scripted reply") and final["conversation"] == body["conversation"]
    validate_response({k: v for k, v in final.items() if k != "available_quotas"})
    # Settled and recorded as any turn: the conversation goes on from it.
    second = gateway.post("/v1/responses?user_id=bg-poll", {"input": "and then", "conversation": body["conversation"]})
    assert second.ok()["output_text"].startswith("Scripted reply (turn 2, 3 messages)")
    chained = gateway.post("/v1/responses?user_id=bg-poll", {"input": "fork", "previous_response_id": body["id"]})
    assert chained.ok()["status"] == "completed"
    # Its stored stream, whole: numbered from 0, every event an openai type, as the SDK reads it.
    events = checked(parse_sse(gateway.get(f"/v1/responses/{body['id']}?user_id=bg-poll&stream=true").body))
    assert kinds(events)[:2] == ["created", "in_progress"] and kinds(events)[-1] == "completed"
    assert all(e["response"]["background"] is True for e in events if "response" in e)
    assert replay_through_sdk(events).output_text == final["output_text"]
    # Another user sees nothing.
    assert gateway.get(f"/v1/responses/{body['id']}?user_id=mallory").status == 404
    assert gateway.get(f"/v1/responses/{body['id']}?user_id=mallory&stream=true").status == 404


def test_a_dropped_stream_resumes_after_its_last_sequence_number_with_the_sdk(mode):
    gateway, _, _ = mode
    sock = open_stream(gateway.direct_port, {"input": "stream me in the background", "background": True,
                                             "metadata": SLOW})
    try:
        head, seen = read_until(sock, b"response.output_text.delta")
        assert seen
    finally:
        reset(sock)  # the connection drops; the turn goes on
    body = head.split(b"\r\n\r\n", 1)[1]
    frames = body[:body.rfind(b"\n\n") + 2]  # whole frames only (chunked framing aside)
    response_id = re.search(rb'"id":"(resp_[^"]+)"', frames).group(1).decode()
    last = int(SEQUENCE.findall(frames)[-1])
    resumed = list(gateway.client().responses.retrieve(response_id, stream=True, starting_after=last))
    assert [event.sequence_number for event in resumed] == list(range(last + 1, last + 1 + len(resumed)))
    assert resumed[-1].type == "response.completed" and resumed[-1].response.background is True
    # The replay from the start is the whole stream; the resumed part is its tail.
    whole = checked(parse_sse(gateway.get(f"/v1/responses/{response_id}?stream=true").body))
    assert [e["sequence_number"] for e in whole[last + 1:]] == [e.sequence_number for e in resumed]
    assert [e["type"] for e in whole[last + 1:]] == [e.type for e in resumed]
    assert replay_through_sdk(whole).output_text == gateway.client().responses.retrieve(response_id).output_text
    # A resume after the end gets the end of the stream only.
    assert parse_sse(gateway.get(f"/v1/responses/{response_id}?stream=true&starting_after={len(whole) - 1}").body) \
        == [(None, "[DONE]")]
    assert gateway.get(f"/v1/responses/{response_id}?stream=true&starting_after=x").status == 422


def test_stream_true_streams_live_and_the_sdk_consumes_it(mode):
    gateway, _, _ = mode
    with gateway.client().responses.stream(model="scripted-chat", input="live background", background=True) as stream:
        for event in stream:
            if hasattr(event, "response"):
                assert event.response.background is True
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text.startswith("Scripted reply")
    assert gateway.client().responses.retrieve(final.id).background is True


def test_cancel_stops_the_turn_and_a_follower_gets_a_cancelled_end(mode):
    gateway, upstream, _ = mode
    wait_until(lambda: upstream.open_streams() == 0, "earlier upstream streams to end")
    user = "?user_id=bg-cancel"
    body = gateway.post(f"/v1/responses{user}", {"input": "a long one", "background": True,
                                                 "metadata": VERY_SLOW}).ok()
    follower = open_stream_get(gateway.direct_port, f"/v1/responses/{body['id']}{user}&stream=true")
    _wait_for(gateway, body["id"], "bg-cancel", done=lambda r: r["output_text"] != "")
    cancelled = gateway.post(f"/v1/responses/{body['id']}/cancel{user}").ok()
    assert cancelled["status"] == "cancelled" and cancelled["background"] is True
    assert cancelled["output_text"] and cancelled["id"] == body["id"]
    validate_response({k: v for k, v in cancelled.items() if k != "available_quotas"})
    wait_until(lambda: upstream.open_streams() == 0, "the upstream call to be cancelled")
    # The follower's stream ends with the cancelled response, then [DONE].
    head, ended = read_until(follower, b"data: [DONE]")
    follower.close()
    assert ended
    events = [json.loads(line[6:]) for line in head.split(b"\r\n\r\n", 1)[1].split(b"\n") if line.startswith(b"data: {")]
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events:
        validate_event(event)
    assert events[-1]["type"] == "response.incomplete" and events[-1]["response"]["status"] == "cancelled"
    assert events[-1]["response"]["error"] is None
    # Idempotent; GET says the same; the stored stream ends the same way.
    assert gateway.post(f"/v1/responses/{body['id']}/cancel{user}").ok()["status"] == "cancelled"
    assert gateway.get(f"/v1/responses/{body['id']}{user}").ok()["status"] == "cancelled"
    stored = list(events_of(parse_sse(gateway.get(f"/v1/responses/{body['id']}{user}&stream=true").body)))
    assert stored[-1]["type"] == "response.incomplete" and len(stored) == len(events)


def test_cancel_refusals(mode):
    gateway, _, _ = mode
    user = "?user_id=bg-refusals"
    plain = gateway.post(f"/v1/responses{user}", {"input": "in the foreground"}).ok()
    reply = gateway.post(f"/v1/responses/{plain['id']}/cancel{user}")
    assert reply.status == 409
    assert reply.json()["detail"]["cause"] == \
        f"Cannot cancel response '{plain['id']}': only background responses can be cancelled"
    assert reply.json()["error"]["type"] == "invalid_request_error"
    done = gateway.post(f"/v1/responses{user}", {"input": "quick", "background": True}).ok()
    _wait_for(gateway, done["id"], "bg-refusals")
    reply = gateway.post(f"/v1/responses/{done['id']}/cancel{user}")
    assert reply.status == 409 and "with status 'completed'" in reply.json()["detail"]["cause"]
    assert gateway.post(f"/v1/responses/{done['id']}/cancel?user_id=mallory").status == 404
    assert gateway.post(f"/v1/responses/resp_unknown/cancel{user}").status == 404
    # Streaming back a response that is not a background one is refused.
    assert gateway.get(f"/v1/responses/{plain['id']}{user}&stream=true").status == 422


def test_background_requires_store_and_creates_nothing(mode):
    gateway, upstream, _ = mode
    upstream.clear()
    reply = gateway.post("/v1/responses?user_id=bg-nostore", {"input": "x", "background": True, "store": False})
    assert reply.status == 400
    assert reply.json()["error"]["param"] == "background" and "store" in reply.json()["detail"]["cause"]
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []


def open_stream_get(port: int, path: str) -> socket.socket:
    """GET a stream on a raw socket; nothing is read yet."""
    sock = socket.socket()
    sock.connect(("127.0.0.1", port))
    sock.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path.encode())
    return sock


@pytest.mark.parametrize("engine", [False, True], ids=["forward", "engine"])
def test_a_restart_fails_what_a_stopped_gateway_left_unfinished(tmp_path, upstream, chat_upstream, engine):
    url = chat_upstream.url if engine else upstream.url
    config = gateway_config(url, tmp_path / "gateway.db", **(_engine_keys(url) if engine else {}))
    first = start_gateway(tmp_path / "one", config)
    try:
        body = first.post("/v1/responses?user_id=bg-restart", {"input": "cut short", "background": True,
                                                               "metadata": VERY_SLOW}).ok()
        _wait_for(first, body["id"], "bg-restart", done=lambda r: r["output_text"] != "")
        time.sleep(3 * FLUSH_LINGER)  # what a crash can lose: the frames of the last flush interval
    finally:
        first.relay.stop()
        first.proc.popen.send_signal(signal.SIGKILL)  # a crash: nothing recorded the end
        first.proc.popen.wait(10)
    second = start_gateway(tmp_path / "two", config)
    try:
        final = second.get(f"/v1/responses/{body['id']}?user_id=bg-restart").ok()
        assert final["status"] == "failed" and final["background"] is True
        assert "stopped before this background response was done" in final["error"]["message"]
        assert final["output_text"]  # the output so far is kept
        validate_response({k: v for k, v in final.items() if k != "available_quotas"})
        events = checked(parse_sse(second.get(f"/v1/responses/{body['id']}?user_id=bg-restart&stream=true").body))
        assert events[-1]["type"] == "response.failed"
        assert "marked failed" in second.log()
        # A clean shutdown records its own unfinished ones as failed too.
        other = second.post("/v1/responses?user_id=bg-restart", {"input": "stopped", "background": True,
                                                                 "metadata": VERY_SLOW}).ok()
    finally:
        second.stop()
    third = start_gateway(tmp_path / "three", config)
    try:
        assert third.get(f"/v1/responses/{other['id']}?user_id=bg-restart").ok()["status"] == "failed"
    finally:
        third.stop()


def test_delete_removes_a_background_response_running_or_done(mode):
    gateway, upstream, _ = mode
    user = "?user_id=bg-delete"
    done = gateway.post(f"/v1/responses{user}", {"input": "to delete", "background": True}).ok()
    _wait_for(gateway, done["id"], "bg-delete")
    running = gateway.post(f"/v1/responses{user}", {"input": "deleted running", "background": True,
                                                    "metadata": VERY_SLOW}).ok()
    for body in (done, running):
        assert gateway.delete(f"/v1/responses/{body['id']}{user}").ok() == {
            "id": body["id"], "object": "response", "deleted": True}
        assert gateway.get(f"/v1/responses/{body['id']}{user}").status == 404
        assert gateway.get(f"/v1/responses/{body['id']}{user}&stream=true").status == 404
        assert gateway.post(f"/v1/responses/{body['id']}/cancel{user}").status == 404
    wait_until(lambda: upstream.open_streams() == 0, "the deleted running response's upstream call to stop")


def test_an_upstream_refusal(mode):
    gateway, upstream, path = mode
    user = "?user_id=bg-refused"
    if path == "/v1/responses":
        # Forward: refused before its stream (an upstream response it forks from is gone):
        # the HTTP error, as a stream gets, and no background response.
        first = gateway.post(f"/v1/responses{user}", {"input": "one"}).ok()
        gateway.post(f"/v1/responses{user}", {"input": "two", "conversation": first["conversation"]}).ok()
        upstream.delete(f"/v1/responses/{first['id']}")
        reply = gateway.post(f"/v1/responses{user}", {"input": "fork", "previous_response_id": first["id"],
                                                      "background": True})
        assert reply.status == 404 and reply.json()["error"]["code"] == "upstream_not_found"
        return
    body = gateway.post(f"/v1/responses{user}", {"input": "fail-upstream now", "background": True}).ok()
    final = _wait_for(gateway, body["id"], "bg-refused")  # the engine: created first, then failed
    assert final["status"] == "failed" and final["error"]["message"] == "scripted upstream failure"
    events = checked(parse_sse(gateway.get(f"/v1/responses/{body['id']}{user}&stream=true").body))
    assert events[-1]["type"] == "response.failed"
