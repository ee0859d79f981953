"""`GET /metrics` through `gateway serve` (issue 24) with a scripted workload over every
endpoint family (LCORE's query API included): each metric moves by exactly the expected
amount (a streamed turn is one LLM call, where LCORE counts it twice), requests refused
with 4xx move no token counter, label values never hold an id or a raw path;
`skip_for_metrics`, the `service.metrics` switch, `root_path` and
`llama_stack.allow_degraded_mode` (on, and off: where the gateway differs from LCORE)."""

from __future__ import annotations

import http.client
import json
import re
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.gateway_proc import events_of, parse_sse
from tests.support.processes import free_port, python_module, spawn, wait_http
from tests.support.raw_client import wait_until

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
# What a label value must never look like: the gateway's and the upstream's ids, users.
_IDS = re.compile(r"resp_|conv_|msg_|[0-9a-f]{24}|metrics-user")


def scrape(gateway, headers: dict[str, str] | None = None) -> Samples:
    reply = gateway.get("/metrics", headers=headers)
    assert reply.status == 200, reply.body[:500]
    assert reply.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(reply.body.decode()):
        for sample in family.samples:
            samples[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def quiet(gateway, seconds: float = 10.0) -> tuple[Samples, int]:
    """A scrape once the gateway has nothing in flight but the scrape itself and no open
    stream, and two scrapes a moment apart agree on every turn counter: what a turn
    records after its response (its `finished` hook, a background run's end) is in, and
    nothing still running can move the counts a test compares. With the scrapes made
    (each is a `/metrics` request the next one counts)."""
    deadline = time.monotonic() + seconds
    last, scrapes = scrape(gateway), 1
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now, scrapes = scrape(gateway), scrapes + 1
        idle = value(now, "gateway_http_requests_in_flight") <= 1 and \
            not any(count for (name, _), count in now.items() if name == "gateway_streams_open")
        settled = all(now.get(key) == count for key, count in last.items()
                      if key[0].startswith(("ls_llm_", "gateway_turns", "gateway_stream_events", "gateway_tokens")))
        if idle and settled:
            return now, scrapes
        last = now
    raise AssertionError("the gateway did not go quiet")


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every series of `name` whose labels include these."""
    wanted = set(labels.items())
    return sum(v for (n, key), v in samples.items() if n == name and wanted <= set(key))


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)


def no_ids_in_labels(samples: Samples) -> None:
    for (name, labels), _ in samples.items():
        for key, label_value in labels:
            assert not _IDS.search(label_value), (name, key, label_value)


@pytest.fixture(scope="module")
def forward(gateway_factory, upstream):
    return gateway_factory(upstream.url, inference={"default_provider": "scripted", "default_model": "scripted-chat"})


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0,
                                                           "api": "chat_completions"})


USER = "?user_id=metrics-user"
TURNS = "/v1/responses"
QUERY, STREAMING_QUERY = "/v1/query", "/v1/streaming_query"
INTERRUPT = "/v1/streaming_query/interrupt"


def _workload(gateway) -> dict[str, int]:
    """One of every endpoint family; what the turns reported as usage."""
    tokens = {"in": 0, "out": 0}

    def used(response: dict) -> None:
        tokens["in"] += response["usage"]["input_tokens"]
        tokens["out"] += response["usage"]["output_tokens"]

    first = gateway.post(TURNS + USER, {"input": "Hello"}).ok()                     # JSON
    used(first)
    status, frames = gateway.stream({"input": "Hello again", "conversation": first["conversation"]},
                                    path=TURNS + USER)                             # SSE
    assert status == 200
    streamed = list(events_of(frames))
    tokens["events"] = len(streamed)
    used([e for e in streamed if e["type"] == "response.completed"][0]["response"])
    created = gateway.post(TURNS + USER, {"input": "In the background", "background": True}).ok()
    found = {}

    def done() -> bool:
        found["r"] = gateway.get(f"{TURNS}/{created['id']}{USER}").ok()
        return found["r"]["status"] == "completed"
    wait_until(done, "the background response")
    used(found["r"])
    replayed = parse_sse(gateway.get(f"{TURNS}/{created['id']}{USER}&stream=true").body)
    tokens["events"] += len(list(events_of(replayed)))    # the background run's stream
    gateway.get(f"{TURNS}/{first['id']}/input_items{USER}").ok()
    gateway.get(f"/v1/models{USER}").ok()
    gateway.get(f"/v1/quotas{USER}").ok()
    gateway.post("/authorized" + USER).ok()
    gateway.get("/liveness").ok()
    return tokens


def _legacy_frames(body: bytes) -> list[dict]:
    return [json.loads(block[6:]) for block in body.decode().split("\n\n") if block]


def _query_workload(gateway) -> dict[str, dict[str, int]]:
    """LCORE's query API: a query, a streaming query, and a streaming query its user
    interrupts (a stalled upstream stream). What the turns reported, per endpoint, and
    how many events each stream's client was sent before it ended."""
    answer = gateway.post(QUERY + USER, {"query": "Hello from the query API", "no_tools": True}).ok()
    reply = gateway.post(STREAMING_QUERY + USER, {"query": "Hello from the streaming query", "no_tools": True})
    assert reply.status == 200, reply.body
    events = _legacy_frames(reply.body)
    end = events[-1]
    assert end["event"] == "end", events
    # The interrupted one, read as it arrives.
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    conn.request("POST", STREAMING_QUERY + USER, body=json.dumps({"query": "please stall-stream", "no_tools": True}),
                 headers={"Content-Type": "application/json"})
    stalled = conn.getresponse()
    assert stalled.status == 200
    start = json.loads(stalled.readline()[6:])
    assert start["event"] == "start", start
    stopped = gateway.post(INTERRUPT + USER, {"request_id": start["data"]["request_id"]}).ok()
    assert stopped["interrupted"] is True
    rest = _legacy_frames(stalled.read())
    conn.close()
    # The closing token and `interrupted` come after the turn ended: not its events.
    assert [event["event"] for event in rest] == ["token", "interrupted"]
    return {QUERY: {"in": answer["input_tokens"], "out": answer["output_tokens"]},
            STREAMING_QUERY: {"in": end["data"]["input_tokens"], "out": end["data"]["output_tokens"],
                              "events": len(events) + 1}}


def _refused(gateway) -> None:
    """Requests refused with 4xx before reaching the model."""
    assert gateway.post(TURNS + USER, {"input": "x", "temperature": "hot"}).status == 422
    assert gateway.post(TURNS + USER, {"input": "x", "model": "no/such-model"}).status in (403, 404)
    assert gateway.get(f"{TURNS}/resp_doesnotexist{USER}").status == 404
    assert gateway.get("/no/such/route").status == 404


@pytest.mark.parametrize("mode", ["forward", "engine"])
def test_a_workload_moves_each_metric_by_exactly_its_amount(mode, request):
    gateway = request.getfixturevalue(mode)
    backend = mode
    before, _ = quiet(gateway)   # nothing an earlier test left running moves the counts
    tokens = _workload(gateway)
    legacy = _query_workload(gateway)
    after, scrapes = quiet(gateway)   # a background run's finished hook runs after its last event is logged
    # LCORE's LLM metrics: one call per turn (the stream too: LCORE counts it twice), on
    # each endpoint; the interrupted streaming query is a call that reported no tokens.
    assert moved(before, after, "ls_llm_calls_total", endpoint=TURNS) == 3
    assert moved(before, after, "ls_llm_calls_total", endpoint=QUERY) == 1
    assert moved(before, after, "ls_llm_calls_total", endpoint=STREAMING_QUERY) == 2
    assert moved(before, after, "ls_llm_calls_total", endpoint=INTERRUPT) == 0
    assert moved(before, after, "ls_llm_calls_failures_total") == 0
    assert moved(before, after, "ls_llm_token_sent_total", endpoint=TURNS) == tokens["in"] > 0
    assert moved(before, after, "ls_llm_token_received_total", endpoint=TURNS) == tokens["out"] > 0
    for endpoint in (QUERY, STREAMING_QUERY):
        assert moved(before, after, "ls_llm_token_sent_total", endpoint=endpoint) == legacy[endpoint]["in"] > 0
        assert moved(before, after, "ls_llm_token_received_total", endpoint=endpoint) == legacy[endpoint]["out"] > 0
    assert moved(before, after, "ls_llm_inference_duration_seconds_count", endpoint=TURNS, result="success") == 3
    assert moved(before, after, "ls_llm_inference_duration_seconds_count", endpoint=QUERY, result="success") == 1
    assert moved(before, after, "ls_llm_inference_duration_seconds_count", endpoint=STREAMING_QUERY,
                 result="success") == 2
    # The model label is the id without its provider prefix.
    calls = [dict(labels) for (name, labels), v in after.items() if name == "ls_llm_calls_total"]
    assert all("/" not in labels["model"] or labels["provider"] == "unknown" for labels in calls)
    # The middleware: route templates, never raw ids; /metrics itself not counted.
    assert moved(before, after, "ls_rest_api_calls_total", path=TURNS, status_code="200") == 3
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/responses/{response_id}",
                 status_code="200") >= 2
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/responses/{response_id}/input_items") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/models") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path="/authorized") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path="/metrics") == 0
    assert moved(before, after, "ls_rest_api_calls_total", path=QUERY, status_code="200") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path=STREAMING_QUERY, status_code="200") == 2
    assert moved(before, after, "ls_rest_api_calls_total", path=INTERRUPT, status_code="200") == 1
    assert moved(before, after, "ls_response_duration_seconds_count", path="/metrics") == scrapes   # all but the last
    assert moved(before, after, "ls_response_duration_seconds_count", path=TURNS) == 3
    assert moved(before, after, "ls_response_duration_seconds_count", path=QUERY) == 1
    assert moved(before, after, "ls_response_duration_seconds_count", path=STREAMING_QUERY) == 2
    assert moved(before, after, "ls_response_duration_seconds_count", path=INTERRUPT) == 1
    assert moved(before, after, "ls_auth_attempts_total", auth_module="noop", result="success", reason="ok") >= 13
    assert moved(before, after, "ls_authorization_checks_total", action="responses", result="allowed") >= 5
    assert moved(before, after, "ls_authorization_checks_total", action="query", result="allowed") == 1
    assert moved(before, after, "ls_authorization_checks_total", action="streaming_query", result="allowed") == 3
    # The gateway's own: the query API's turns are turns like any other (JSON, streams).
    assert moved(before, after, "gateway_turns_total", backend=backend, outcome="completed") == 5
    assert moved(before, after, "gateway_turns_total", backend=backend, mode="json") == 2
    assert moved(before, after, "gateway_turns_total", backend=backend, mode="stream") == 3
    assert moved(before, after, "gateway_turns_total", backend=backend, mode="stream", outcome="abandoned") == 1
    assert moved(before, after, "gateway_turns_total", backend=backend, mode="background") == 1
    assert moved(before, after, "gateway_time_to_first_event_seconds_count", backend=backend) == 6
    assert moved(before, after, "gateway_time_to_first_event_seconds_count", backend=backend, mode="stream") == 3
    assert moved(before, after, "gateway_stream_duration_seconds_count", backend=backend) == 4
    # Every event a stream's client was sent, once per stream (both dialects of stream).
    assert moved(before, after, "gateway_stream_events_total", backend=backend) == \
        tokens["events"] + legacy[STREAMING_QUERY]["events"]
    assert value(after, "gateway_streams_open", backend=backend) == 0
    assert value(after, "gateway_http_requests_in_flight") == 1      # the scrape itself
    assert moved(before, after, "gateway_background_responses_total", state="completed") == 1
    assert value(after, "gateway_background_responses_running") == 0
    upstream_operation = "responses" if backend == "forward" else "chat_completions"
    assert moved(before, after, "gateway_upstream_request_duration_seconds_count", operation=upstream_operation,
                 outcome="ok") >= 6
    assert moved(before, after, "gateway_engine_rounds_total", outcome="ok") == (5 if backend == "engine" else 0)
    assert total(after, "gateway_upstream_capability_mode", api=upstream_operation) == 1
    assert moved(before, after, "gateway_db_operation_duration_seconds_count", operation="write") >= 1
    no_ids_in_labels(after)

    # Refused requests: counted as calls by status, never as LLM calls or tokens.
    before = after
    _refused(gateway)
    after = scrape(gateway)
    for name in ("ls_llm_calls_total", "ls_llm_token_sent_total", "ls_llm_token_received_total",
                 "gateway_turns_total"):
        assert moved(before, after, name) == 0, name
    assert moved(before, after, "ls_llm_validation_errors_total", endpoint=TURNS) == 1
    assert moved(before, after, "ls_rest_api_calls_total", path=TURNS, status_code="422") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/responses/{response_id}",
                 status_code="404") == 1
    no_ids_in_labels(after)   # no route: not a label (LCORE counts known routes only)


def test_startup_gauges(forward):
    samples = scrape(forward)
    assert value(samples, "ls_started_in_degraded_mode") == 0
    configured = {dict(labels)["model"]: v for (name, labels), v in samples.items()
                  if name == "ls_provider_model_configuration"}
    assert configured and sum(configured.values()) <= 1


def test_a_failed_turn_is_a_failure_and_charges_no_tokens(forward):
    before = scrape(forward)
    status, frames = forward.stream({"input": "please fail-upstream"}, path=TURNS + USER)
    assert status == 200 and "response.failed" in [e["type"] for e in events_of(frames)]
    assert forward.post(TURNS + USER, {"input": "please fail-upstream"}).status >= 500
    after = scrape(forward)
    assert moved(before, after, "ls_llm_calls_total", endpoint=TURNS) == 2
    assert moved(before, after, "ls_llm_calls_failures_total", endpoint=TURNS) == 2
    assert moved(before, after, "ls_llm_inference_duration_seconds_count", result="failure") == 2
    assert moved(before, after, "gateway_turns_total", outcome="failed") + \
        moved(before, after, "gateway_turns_total", outcome="error") == 2


def test_quota_checks_and_refusals(gateway_factory, upstream, tmp_path):
    limiters = [{"name": "daily", "type": "user_limiter", "initial_quota": 110, "quota_increase": 1000,
                 "period": "1 day"},
                {"name": "cluster", "type": "cluster_limiter", "initial_quota": 1000000, "quota_increase": 0,
                 "period": "1 day"}]
    storage = {"sqlite": {"db_path": str(tmp_path / "gateway.db")}}
    gateway = gateway_factory(upstream.url, database=storage, quota_handlers={**storage, "limiters": limiters})
    small = {"input": "hi", "max_output_tokens": 99, "tool_choice": "none"}
    before = scrape(gateway)
    first = gateway.post(TURNS + "?user_id=q-user", small).ok()
    spent = first["usage"]["input_tokens"] + first["usage"]["output_tokens"]
    assert gateway.post(TURNS + "?user_id=q-user", {**small, "input": "x" * 2000}).status == 429   # 500 tokens
    after = scrape(gateway)
    assert moved(before, after, "ls_quota_checks_total", endpoint=TURNS, result="allowed") == 1
    assert moved(before, after, "ls_quota_checks_total", endpoint=TURNS, result="exceeded") == 1
    assert moved(before, after, "gateway_quota_admissions_total", limiter="daily") == 1
    assert moved(before, after, "gateway_quota_refusals_total", limiter="daily") == 1
    assert moved(before, after, "gateway_quota_tokens_charged_total", limiter="daily") == spent
    assert moved(before, after, "gateway_quota_tokens_charged_total", limiter="cluster") == spent
    assert value(after, "gateway_quota_cluster_balance_tokens", limiter="cluster") == \
        first["available_quotas"]["cluster"]
    assert moved(before, after, "ls_llm_token_sent_total") == first["usage"]["input_tokens"]   # not the 429
    assert moved(before, after, "ls_rest_api_calls_total", path=TURNS, status_code="429") == 1
    no_ids_in_labels(after)


def test_skip_for_metrics_and_authentication_facts(gateway_factory, upstream):
    key = "metrics-test-key-0123456789"
    config = {"module": "api-key-token", "api_key_config": {"api_key": key}}
    gateway = gateway_factory(upstream.url, authentication={**config, "skip_for_metrics": True})
    before = scrape(gateway)                                     # no credential: let through
    assert gateway.get("/v1/models", headers={"Authorization": "Bearer wrong-key-0000"}).status == 401
    assert gateway.get("/v1/models").status == 401
    assert gateway.get("/v1/models", headers={"Authorization": f"Bearer {key}"}).status == 200
    scrape(gateway)                                              # a scraper without credential: skipped
    after = scrape(gateway, headers={"Authorization": f"Bearer {key}"})   # with one: checked
    labels = {"auth_module": "api-key-token"}
    assert moved(before, after, "ls_auth_attempts_total", **labels, result="failure", reason="invalid_credential") == 1
    assert moved(before, after, "ls_auth_attempts_total", **labels, result="failure", reason="no_credential") == 1
    assert moved(before, after, "ls_auth_attempts_total", **labels, result="success") == 2   # models, the scrape
    assert moved(before, after, "ls_auth_attempts_total", **labels, result="skipped", reason="probe") == 1
    assert moved(before, after, "ls_authorization_checks_total", action="get_metrics", result="allowed") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path="/v1/models", status_code="401") == 2
    assert gateway.get("/metrics", headers={"Authorization": "Bearer wrong-key-0000"}).status == 401
    closed = gateway_factory(upstream.url, authentication=config)   # without skip_for_metrics
    assert closed.get("/metrics").status == 401


def test_authorization_denied_is_counted(gateway_factory, upstream):
    key = "metrics-rbac-key-0123456789"
    gateway = gateway_factory(upstream.url, authentication={
        "module": "api-key-token", "skip_for_metrics": True,
        "api_key_config": {"keys": [{"key": key, "user_id": "reader", "roles": ["reader"]}]}},
        authorization={"access_rules": [{"role": "reader", "actions": ["get_models"]}]})
    before = scrape(gateway)
    assert gateway.post(TURNS, {"input": "x"}, headers={"Authorization": f"Bearer {key}"}).status == 403
    after = scrape(gateway)
    assert moved(before, after, "ls_authorization_checks_total", action="responses", result="denied") == 1
    assert moved(before, after, "ls_rest_api_calls_total", path=TURNS, status_code="403") == 1


def test_metrics_off_and_root_path(gateway_factory, upstream):
    off = gateway_factory(upstream.url, service={"host": "127.0.0.1", "access_log": False, "metrics": False})
    assert off.get("/metrics").status == 404
    assert off.post(TURNS, {"input": "Hello"}).status == 200
    rooted = gateway_factory(upstream.url, service={"host": "127.0.0.1", "access_log": False, "root_path": "/api"})
    before = scrape(rooted)
    rooted.post("/api/v1/responses", {"input": "Hello"}).ok()
    after = scrape(rooted)
    assert moved(before, after, "ls_rest_api_calls_total", path=TURNS, status_code="200") == 1
    assert moved(before, after, "ls_llm_calls_total", endpoint=TURNS) == 1
    assert rooted.get("/api/metrics").status == 200


def test_degraded_mode(gateway_factory):
    dead = "http://127.0.0.1:9"
    degraded = gateway_factory(dead, llama_stack={"url": dead, "max_retries": 0, "allow_degraded_mode": True})
    assert value(scrape(degraded), "ls_started_in_degraded_mode") == 1
    ready = degraded.get("/readiness")
    assert ready.status == 200, ready.body
    # LCORE's body exactly, "providers" aside (its degraded_mode_startup.feature).
    assert {key: value for key, value in ready.json().items() if key != "providers"} == {
        "ready": True, "reason": "Service running in degraded mode", "overall_status": "degraded",
        "impacts": ["LLM inference unavailable", "RAG functionality unavailable", "Agent tools unavailable"]}
    strict = gateway_factory(dead)
    assert value(scrape(strict), "ls_started_in_degraded_mode") == 0
    assert strict.get("/readiness").status == 503


def test_without_degraded_mode_the_gateway_starts_and_serves_once_its_upstream_is_up(gateway_factory,
                                                                                     tmp_path):
    """Where LCORE refuses to start (docs/operating.md, "Degraded mode"): not ready, then
    ready and serving as soon as the upstream answers, without a restart."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    gateway = gateway_factory(url, llama_stack={"url": url, "max_retries": 0})
    assert "unreachable at start-up" in gateway.log()
    assert gateway.get("/readiness").status == 503
    assert gateway.post(TURNS, {"input": "too early"}).status == 503
    late = spawn(f"upstream-{port}", python_module("gateway.devserver", "--port", str(port)), tmp_path)
    try:
        wait_http(late, f"{url}/health")
        assert gateway.get("/readiness").json()["overall_status"] == "healthy"
        assert gateway.post(TURNS, {"input": "Hello"}).status == 200
        assert value(scrape(gateway), "ls_started_in_degraded_mode") == 0
    finally:
        late.stop()


FAULTY = [{"type": "mcp", "server_label": "faulty", "server_url": "http://127.0.0.1:9/faulty/mcp",
           "require_approval": "never"}]


def test_tool_calls_and_mcp_failures_with_clients_labels_collapsed(gateway):
    """The session's gateway takes clients' own MCP servers (simulated by the upstream)."""
    before = scrape(gateway)
    failed = gateway.post(TURNS + USER, {"input": "Use the explode tool", "tools": FAULTY}).ok()
    assert [item["type"] for item in failed["output"]] == ["mcp_list_tools", "mcp_call", "message"]
    after = scrape(gateway)
    assert moved(before, after, "gateway_tool_calls_total", tool_type="mcp", outcome="error") == 1
    assert moved(before, after, "gateway_mcp_failures_total", server="client", operation="call_tool") == 1
    assert moved(before, after, "gateway_mcp_failures_total", server="faulty") == 0   # never the client's label
    assert moved(before, after, "ls_llm_calls_total", endpoint=TURNS) == 1
    assert moved(before, after, "ls_llm_calls_failures_total") == 0                  # the turn itself completed
    no_ids_in_labels(after)


def test_postgres_pool_and_database_latency(gateway_factory, upstream, postgres):
    gateway = gateway_factory(upstream.url, database={"postgres": postgres.new_database()})
    before = scrape(gateway)
    gateway.post(TURNS + USER, {"input": "Hello"}).ok()
    after = scrape(gateway)
    assert value(after, "gateway_db_pool_connections", state="max") > 0
    assert value(after, "gateway_db_pool_connections", state="in_use") >= 0
    assert value(after, "gateway_db_pool_connections", state="idle") >= 0
    assert moved(before, after, "gateway_db_operation_duration_seconds_count", operation="write") >= 1
    no_ids_in_labels(after)
