"""The access line through `gateway serve` (`service.access_log_format: json`): one
line per request for every endpoint family, each parsing as JSON with the request id,
the keyed hash of the user id (never the id or the credential), the route template,
status, duration, and for turns the model, tokens, upstream time and, for streams, the
time to the first event."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from typing import Any

import pytest

KEY = "access-log-api-key-0123456789"
SECRET = "access-log-anonymisation-key"
AUTH = {"Authorization": f"Bearer {KEY}"}
FIELDS = {"time", "type", "request_id", "user", "method", "route", "status", "duration_ms", "model",
          "input_tokens", "output_tokens", "upstream_ms", "first_event_ms"}


@pytest.fixture(scope="module")
def logged(gateway_factory, upstream):
    return gateway_factory(upstream.url, env={"OTEL_ANONYMIZATION_SECRET": SECRET},
                           service={"access_log": True, "access_log_format": "json"},
                           authentication={"module": "api-key-token", "api_key_config": {"api_key": KEY}})


def access_lines(gateway) -> dict[str, dict[str, Any]]:
    lines = {}
    for line in gateway.log().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("type") == "access":
                lines[entry["request_id"]] = entry
    return lines


def line_of(gateway, request_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 5
    while (entry := access_lines(gateway).get(request_id)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert entry is not None, f"no access line for {request_id}"
    assert set(entry) == FIELDS
    return entry


# (method, path, body, status, route template): one request per endpoint family.
FAMILIES = [
    ("GET", "/v1/models", None, 200, "/v1/models"),
    ("GET", "/v1/tools", None, 200, "/v1/tools"),
    ("GET", "/v1/shields", None, 200, "/v1/shields"),
    ("GET", "/v1/conversations", None, 200, "/v1/conversations"),
    ("POST", "/v1/conversations", {"metadata": {"k": "v"}}, 200, "/v1/conversations"),
    ("GET", "/v2/conversations", None, 500, "/v2/conversations"),
    ("GET", f"/v1/conversations/{'0' * 48}", None, 404, "/v1/conversations/{conversation_id}"),
    ("GET", "/v1/feedback/status", None, 200, "/v1/feedback/status"),
    ("GET", "/v1/quotas", None, 200, "/v1/quotas"),
    ("POST", "/authorized", None, 200, "/authorized"),
    ("GET", "/liveness", None, 200, "/liveness"),
    ("GET", "/readiness", None, 200, "/readiness"),
    ("GET", "/metrics", None, 200, "/metrics"),
    ("GET", "/openapi.json", None, 200, "/openapi.json"),
    ("GET", "/", None, 200, "/"),
    ("POST", "/v1/streaming_query/interrupt", {"request_id": "00000000-0000-4000-8000-000000000000"}, 404,
     "/v1/streaming_query/interrupt"),
]

PUBLIC = {"/v1/feedback/status", "/openapi.json"}


def user_hash(user_id: str) -> str:
    return hmac.new(SECRET.encode(), user_id.encode(), hashlib.sha256).hexdigest()


def test_every_endpoint_family_has_one_parsable_line(logged):
    user = logged.post("/authorized", headers=AUTH).ok()["user_id"]
    for index, (method, path, body, status, route) in enumerate(FAMILIES):
        request_id = f"log-family-{index}"
        reply = logged.request(method, path, body, headers={**AUTH, "X-Request-ID": request_id})
        assert reply.status == status, (path, reply.body[:300])
        entry = line_of(logged, request_id)
        assert (entry["method"], entry["route"], entry["status"]) == (method, route, status)
        # Public routes authenticate nobody: no user.
        assert entry["user"] == (None if path in PUBLIC else user_hash(user)) and entry["duration_ms"] > 0, entry
        assert entry["model"] is None and entry["first_event_ms"] is None
    models = line_of(logged, "log-family-0")
    assert models["upstream_ms"] > 0   # /v1/models asks the upstream


def turn(gateway, path: str, body: dict[str, Any], request_id: str, stream: bool = False) -> dict[str, Any]:
    reply = gateway.post(path, body, headers={**AUTH, "X-Request-ID": request_id})
    assert reply.status == 200, reply.body[:300]
    entry = line_of(gateway, request_id)
    assert entry["route"] == path and entry["status"] == 200 and entry["model"]
    assert entry["input_tokens"] > 0 and entry["output_tokens"] > 0 and entry["upstream_ms"] > 0
    assert (entry["first_event_ms"] is not None) == stream
    if stream:
        assert 0 < entry["first_event_ms"] <= entry["duration_ms"]
    return entry


def test_turn_endpoints_carry_model_tokens_and_times(logged, upstream):
    turn(logged, "/v1/responses", {"input": "hello log"}, "log-turn-json")
    streamed = logged.post("/v1/responses", {"input": "hello stream", "stream": True},
                           headers={**AUTH, "X-Request-ID": "log-turn-sse"})
    assert streamed.status == 200
    entry = line_of(logged, "log-turn-sse")
    assert entry["first_event_ms"] > 0 and entry["output_tokens"] > 0
    # The request id went upstream with the turn's call.
    # (Any of its calls: the upstream is shared, and a topic summary runs beside the turn.)
    assert any(sent["headers"].get("x-request-id") == "log-turn-sse" for sent in upstream.requests("/v1/responses"))
    turn(logged, "/v1/query", {"query": "hello query", "no_tools": True}, "log-turn-query")
    turn(logged, "/v1/streaming_query", {"query": "hello stream query", "no_tools": True}, "log-turn-sq", stream=True)
    turn(logged, "/v1/infer", {"question": "hello infer"}, "log-turn-infer")
    response_id = logged.post("/v1/responses", {"input": "stored"}, headers=AUTH).ok()["id"]
    reply = logged.get(f"/v1/responses/{response_id}", headers={**AUTH, "X-Request-ID": "log-read"})
    assert reply.status == 200
    assert line_of(logged, "log-read")["route"] == "/v1/responses/{response_id}"


def test_refusals_and_unknown_routes(logged):
    refused = logged.post("/v1/responses", {"input": "x"}, headers={"X-Request-ID": "log-refused"})
    assert refused.status == 401
    entry = line_of(logged, "log-refused")
    assert entry["status"] == 401 and entry["user"] is None and entry["route"] == "/v1/responses"
    wrong = logged.post("/v1/responses", {"input": "x"},
                        headers={"Authorization": "Bearer not-the-key-but-a-secret-all-the-same",
                                 "X-Request-ID": "log-wrong-key"})
    assert wrong.status == 401
    unknown = logged.get("/v1/nothing-here", headers={**AUTH, "X-Request-ID": "log-unknown"})
    assert unknown.status == 404
    assert line_of(logged, "log-unknown")["route"] is None   # never the raw path
    log = logged.log()
    assert KEY not in log and "not-the-key-but-a-secret" not in log
