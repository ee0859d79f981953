"""A refusal costs what the request cost (issue 39), through `gateway serve`:

- a 150 KB body of empty input items, tools, `include` entries or `/v1/query`
  attachments is refused by the operator's count caps in well under a second, the
  gateway's resident memory barely moving (it was seconds and gigabytes: 27 errors per
  item, each with a 400-character `loc`, the first echoing the whole input);
- every route that takes a body, sent hostile bodies (every field of its model a long
  list of objects, thousands of unknown keys, long strings, a list at the top), answers
  an error body no larger than `MAX_ERROR_BODY_BYTES`, never a 500;
- a JSON integer of 4,301 digits (past Python's int_max_str_digits) is FastAPI's
  `json_invalid` 422 on every route that reads JSON, not a 500 with a traceback.
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any

import pytest

from gateway.http.operations import OPERATIONS
from gateway.schema.bounds import MAX_ERROR_BODY_BYTES
from tests.support.gateway_proc import HttpReply

ROOT = "root-hostile-key-1"
CACHE = {"type": "sqlite", "sqlite": {"db_path": "/tmp/unused-by-the-gateway.db"}}
UNKNOWN_CONVERSATION = "0" * 48
# Every route that reads a JSON body (the two others, cancel and `/authorized`, read none).
BODY_ROUTES = sorted((op.method, op.path) for op in OPERATIONS
                     if op.method in ("post", "put") and op.path not in ("/v1/responses/{response_id}/cancel",
                                                                          "/authorized"))
HUGE_INT = b"1" * 4301
KB_150 = 150_000


def test_the_walk_covers_every_route_with_a_request_model():
    modelled = {(op.method, op.path) for op in OPERATIONS if op.request is not None}
    assert modelled <= set(BODY_ROUTES)


@pytest.fixture(scope="module")
def hostile(gateway_factory, upstream, tmp_path_factory):
    """A gateway on which every body-taking route reads and validates its body: an admin
    key (quota API, feedback status), limiters, compaction keys (whose input limit
    passes 150 KB), feedback on, LCORE's conversation cache (`/v2`)."""
    data = tmp_path_factory.mktemp("hostile")
    return gateway_factory(
        upstream.url,
        authentication={"module": "api-key-token", "api_key_config": {"keys": [
            {"key": ROOT, "user_id": "root", "roles": ["root"]}]}},
        authorization={"access_rules": [{"role": "root", "actions": ["admin"]}]},
        quota_handlers={"sqlite": {"db_path": str(data / "quota.db")}, "limiters": [
            {"name": "daily", "type": "user_limiter", "initial_quota": 10**9, "quota_increase": 0,
             "period": "1 day"}]},
        response_compaction={"keys": [{"id": "k1", "secret": "k1-secret-0123456789abcdefghijklmnopqrstuv"}],
                             "max_input_bytes": 1024 * 1024},
        user_data_collection={"feedback_enabled": True, "feedback_storage": str(data / "feedback")},
        conversation_cache=CACHE)


def send(gateway, method: str, path: str, raw: bytes, timeout: float = 60) -> HttpReply:
    """Straight to the gateway's own port (not the recording relay): what is timed is
    the gateway's answer."""
    path = path.replace("{user_id}", "alice").replace("{conversation_id}", UNKNOWN_CONVERSATION)
    conn = http.client.HTTPConnection("127.0.0.1", gateway.direct_port, timeout=timeout)
    try:
        conn.request(method.upper(), path, body=raw, headers={
            "Content-Type": "application/json", "Authorization": f"Bearer {ROOT}", "Idempotency-Key": "hostile"})
        resp = conn.getresponse()
        return HttpReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


def rss_kib(gateway) -> int:
    with open(f"/proc/{gateway.proc.popen.pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def many(unit: bytes, size: int) -> bytes:
    """A JSON list of copies of `unit`, about `size` bytes."""
    return b"[" + b",".join([unit] * (size // (len(unit) + 1))) + b"]"


# field -> (route, a body of about `size` bytes whose `field` is a list of bad items)
CAPPED = {
    "input": ("/v1/responses", lambda size: b'{"input":' + many(b"{}", size) + b"}"),
    "tools": ("/v1/responses", lambda size: b'{"input":"x","tools":' + many(b"{}", size) + b"}"),
    "include": ("/v1/responses", lambda size: b'{"input":"x","include":' + many(b'"x"', size) + b"}"),
    "attachments": ("/v1/query", lambda size: b'{"query":"q","attachments":' + many(b"{}", size) + b"}"),
}
CAPS = {"input": 1000, "tools": 128, "include": 32, "attachments": 100}   # the defaults


@pytest.mark.parametrize("field", sorted(CAPPED))
def test_a_150kb_list_is_refused_at_once_by_its_cap(hostile, field):
    path, body = CAPPED[field]
    send(hostile, "post", path, body(3_000))   # the route's first request loads what it uses
    before = rss_kib(hostile)
    started = time.monotonic()
    reply = send(hostile, "post", path, body(KB_150))
    elapsed = time.monotonic() - started
    grown_mib = (rss_kib(hostile) - before) / 1024
    assert reply.status == 422, reply.body[:500]
    detail = reply.json()["detail"]
    count = len(json.loads(body(KB_150))[field])
    assert detail[0]["type"] == "too_long" and detail[0]["loc"] == ["body", field]
    assert detail[0]["ctx"] == {"field_type": "List", "max_length": CAPS[field], "actual_length": count}
    assert detail[0]["msg"] == f"List should have at most {CAPS[field]} items after validation, not {count}"
    assert len(reply.body) < 2048
    assert elapsed < 1, f"{field}: {elapsed:.2f} s"
    assert grown_mib < 20, f"{field}: RSS grew {grown_mib:.1f} MiB"


@pytest.mark.parametrize("field", sorted(CAPPED))
def test_a_list_at_its_cap_is_validated_at_once(hostile, field):
    """At the cap the items are validated (no `too_long`): the refusal names the first
    bad item, as cheaply as the cap's (validation stops at a list's first bad item)."""
    path, body = CAPPED[field]
    unit = b'"x"' if field == "include" else b"{}"
    raw = body(CAPS[field] * (len(unit) + 1))
    assert len(json.loads(raw)[field]) == CAPS[field]
    send(hostile, "post", path, raw)
    before = rss_kib(hostile)
    started = time.monotonic()
    reply = send(hostile, "post", path, raw)
    elapsed = time.monotonic() - started
    assert reply.status == 422 and len(reply.body) <= MAX_ERROR_BODY_BYTES
    detail = reply.json()["detail"]
    assert all(entry["type"] != "too_long" for entry in detail)
    assert any(entry["loc"][:2] == ["body", field] and 0 in entry["loc"] for entry in detail)
    assert elapsed < 1 and (rss_kib(hostile) - before) / 1024 < 20


def hostile_bodies(operation) -> dict[str, bytes]:
    """Bodies built to make an error body large: every field of the route's model a long
    list of objects, thousands of unknown keys, every field a long string, a list."""
    model = operation.request.load() if hasattr(operation.request, "load") else operation.request
    fields = list(getattr(model, "model_fields", {})) or ["request_id", "input"]
    objects = many(b"{}", KB_150 // len(fields))
    return {
        "lists-of-objects": b"{" + b",".join(json.dumps(name).encode() + b":" + objects for name in fields) + b"}",
        "unknown-keys": json.dumps({f"unknown_{i}": [{}] for i in range(KB_150 // 20)}).encode(),
        "long-strings": json.dumps({name: "\u00e9\"\\" * (KB_150 // 4 // len(fields)) for name in fields}).encode(),
        "top-level-list": many(b"{}", KB_150),
        "nested-lists": json.dumps({name: [[{}] * 40] * 40 for name in fields}).encode(),
    }


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda route: f"{route[0].upper()} {route[1]}")
def test_every_error_body_is_bounded(hostile, route):
    operation = next(op for op in OPERATIONS if (op.method, op.path) == route)
    for kind, raw in hostile_bodies(operation).items():
        reply = send(hostile, route[0], route[1], raw)
        assert reply.status != 500, (kind, reply.body[:500])
        if reply.status >= 400:
            assert len(reply.body) <= MAX_ERROR_BODY_BYTES, (kind, reply.status, len(reply.body))
            json.loads(reply.body)   # whole JSON, not a cut


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda route: f"{route[0].upper()} {route[1]}")
@pytest.mark.parametrize("where", ["top", "nested"])
def test_a_4301_digit_integer_is_lcores_422(hostile, route, where):
    raw = b'{"x":' + HUGE_INT + b"}" if where == "top" else b'{"input":[{"a":[' + HUGE_INT + b"]}]}"
    log_before = len(hostile.log())
    reply = send(hostile, route[0], route[1], raw)
    assert reply.status == 422, reply.body[:500]
    detail: Any = reply.json()["detail"]
    assert [(entry["type"], entry["loc"], entry["msg"]) for entry in detail] == [
        ("json_invalid", ["body", 0], "JSON decode error")]
    assert "Traceback" not in hostile.log()[log_before:]


MB_10 = 10 * 1024 * 1024 - 4096   # under `service.max_request_body_bytes` (10 MiB)
LARGEST = {
    "input-items": b'{"input":' + many(b"{}", MB_10) + b"}",
    "content-parts": b'{"input":[{"type":"message","role":"user","content":' + many(b"{}", MB_10) + b"}]}",
    "unknown-keys": b'{"input":"x",' + b",".join(b'"k%d":0' % i for i in range(MB_10 // 12)) + b"}",
    "attachments": b'{"query":"q","attachments":' + many(b"{}", MB_10) + b"}",
}


@pytest.mark.parametrize("shape", sorted(LARGEST))
def test_a_10mb_hostile_body_is_refused_before_it_is_decoded(hostile, shape):
    """A body of millions of items is refused by `service.max_json_items` before orjson
    builds an object for each (10 MB of `{},` would be 300 MB of dicts). What is left is
    the body itself: aiohttp's buffers and the copy its strings are cut from, a few
    times 10 MB that the allocator may keep."""
    path = "/v1/query" if shape == "attachments" else "/v1/responses"
    raw = LARGEST[shape]
    send(hostile, "post", path, raw)
    before = rss_kib(hostile)
    started = time.monotonic()
    reply = send(hostile, "post", path, raw)
    elapsed = time.monotonic() - started
    assert reply.status == 422, reply.body[:500]
    (entry,) = reply.json()["detail"]
    assert entry["type"] == "json_invalid" and entry["ctx"]["error"].startswith("too many items")
    assert elapsed < 1, f"{shape}: {elapsed:.2f} s"
    assert (rss_kib(hostile) - before) / 1024 < 40
