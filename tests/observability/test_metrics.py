"""The metric definitions and the pure pieces of recording: names and labels follow the
rules docs/operating.md states, hot counters become samples only when scraped, ids
never become labels."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from prometheus_client import generate_latest

from gateway.observability.calls import EngineMetrics, UpstreamMetrics, operation
from gateway.observability.http import auth_failure_reason
from gateway.observability.metrics import DEFINITIONS, LCORE_BUCKETS, Metrics
from gateway.observability.turns import TurnMetrics, llm_labels
from gateway.turns.hooks import Hooks

# Labels whose values could be unbounded were they ever added.
_FORBIDDEN_LABELS = {"user_id", "user", "conversation_id", "response_id", "request_id", "url"}


def test_definitions_follow_the_naming_rules():
    names = [definition.name for definition in DEFINITIONS]
    assert len(names) == len(set(names))
    for definition in DEFINITIONS:
        assert definition.name.startswith(("ls_", "gateway_")), definition.name
        assert (definition.kind == "counter") == definition.name.endswith("_total"), definition.name
        if definition.kind == "histogram":
            assert definition.name.endswith("_seconds") and definition.buckets, definition.name
        assert not _FORBIDDEN_LABELS & set(definition.labels), definition.name


def test_lcore_names_labels_and_buckets():
    by_name = {definition.name: definition for definition in DEFINITIONS}
    assert by_name["ls_rest_api_calls_total"].labels == ("path", "status_code")
    assert by_name["ls_llm_calls_total"].labels == ("provider", "model", "endpoint")
    assert by_name["ls_llm_inference_duration_seconds"].labels == ("provider", "model", "endpoint", "result")
    assert by_name["ls_llm_inference_duration_seconds"].buckets == LCORE_BUCKETS
    assert by_name["ls_response_duration_seconds"].buckets == LCORE_BUCKETS
    assert by_name["ls_started_in_degraded_mode"].labels == ()


def test_every_definition_is_exposed_once_and_hot_counters_at_scrape_time():
    metrics = Metrics()
    metrics.hot.rest_calls["/v1/responses"] = {200: 7}
    metrics.hot.stream_events["forward"] += 40
    text = generate_latest(metrics.registry).decode()
    assert 'ls_rest_api_calls_total{path="/v1/responses",status_code="200"} 7.0' in text
    assert 'gateway_stream_events_total{backend="forward"} 40.0' in text
    assert "_created" not in text and "process_" not in text
    helps = {line.split()[2] for line in text.splitlines() if line.startswith("# HELP")}
    scraped = {"gateway_upstream_capability_mode", "gateway_db_pool_connections"}   # registered with the state
    assert {d.name for d in DEFINITIONS} - scraped == helps


def test_two_apps_never_share_a_series():
    first, second = Metrics(), Metrics()
    first.metric("ls_llm_calls_total").labels("p", "m", "/v1/responses").inc()
    assert "ls_llm_calls_total{" not in generate_latest(second.registry).decode()


def test_the_model_label_drops_only_the_provider_prefix():
    def turn(model_id: str, provider: str | None):
        return SimpleNamespace(plan=SimpleNamespace(model=SimpleNamespace(id=model_id, provider_id=provider)))
    assert llm_labels(turn("scripted/scripted-chat", "scripted"), "/v1/responses") == \
        ("scripted", "scripted-chat", "/v1/responses")
    assert llm_labels(turn("meta-llama/Llama-3.1-8B", "vllm"), "/v1/responses")[:2] == \
        ("vllm", "meta-llama/Llama-3.1-8B")
    assert llm_labels(turn("gpt-4o", None), "/v1/responses")[:2] == ("unknown", "gpt-4o")


def test_upstream_paths_collapse_to_operations():
    assert operation("/v1/responses") == "responses"
    assert operation("/v1/responses/resp_123/input_items") == "responses"
    assert operation("/v1/conversations/conv_abc/items") == "conversations"
    assert operation("/v1/chat/completions") == "chat_completions"
    assert operation("/v2/anything/else") == "other"


def test_upstream_and_engine_hooks_record_bounded_labels():
    metrics = Metrics()
    upstream = UpstreamMetrics(metrics)
    for index in range(300):   # many ids: one series
        upstream.answered(f"/v1/responses/resp_{index}", 404, 0.002)
    upstream.failed("/v1/chat/completions", "timeout", 1.0)
    upstream.retried("/v1/models", "connect_error")
    engine = EngineMetrics(metrics)
    engine.round(True)
    engine.tool("mcp", False, 0.01)
    engine.tool("a-new-kind", True, 0.01)
    for planned in ("mcp_tool", "web_search_tool", "file_search"):   # as the engine's plan names them
        engine.tool(planned, True, 0.01)
    text = generate_latest(metrics.registry).decode()
    assert 'gateway_upstream_errors_total{operation="responses",outcome="client_error"} 300.0' in text
    assert 'gateway_upstream_errors_total{operation="chat_completions",outcome="timeout"} 1.0' in text
    assert 'gateway_upstream_retries_total{operation="models",outcome="connect_error"} 1.0' in text
    assert 'gateway_engine_rounds_total{outcome="ok"} 1.0' in text
    assert 'gateway_tool_duration_seconds_count{outcome="error",tool_type="mcp"} 1.0' in text
    assert 'gateway_tool_duration_seconds_count{outcome="ok",tool_type="other"} 1.0' in text
    for kind in ("mcp", "web_search", "file_search"):
        assert f'gateway_tool_duration_seconds_count{{outcome="ok",tool_type="{kind}"}} 1.0' in text
    assert "resp_" not in text


def test_auth_failure_reasons():
    assert auth_failure_reason(401, had_credential=False) == "no_credential"
    assert auth_failure_reason(401, had_credential=True) == "invalid_credential"
    assert auth_failure_reason(403, had_credential=True) == "forbidden"
    assert auth_failure_reason(503, had_credential=True) == "provider_unavailable"


def test_plain_histograms_expose_cumulative_le_buckets():
    metrics = Metrics()
    histogram = metrics.metric("gateway_time_to_first_event_seconds").labels("forward", "stream")
    for seconds in (0.0005, 0.001, 0.02, 0.02, 100.0):   # 0.001 falls in le="0.001" (le is <=)
        histogram.observe(seconds)
    text = generate_latest(metrics.registry).decode()
    def line(suffix: str, le: str | None) -> str:
        bucket = f',le="{le}"' if le else ""
        return f'gateway_time_to_first_event_seconds_{suffix}{{backend="forward"{bucket},mode="stream"}}'
    assert f"{line('bucket', '0.001')} 2.0" in text
    assert f"{line('bucket', '0.025')} 4.0" in text
    assert f"{line('bucket', '60.0')} 4.0" in text
    assert f"{line('bucket', '+Inf')} 5.0" in text
    assert f"{line('count', None)} 5.0" in text
    gauge = metrics.metric("gateway_background_responses_running")
    gauge.inc()
    gauge.inc()
    gauge.dec()
    assert "gateway_background_responses_running 1.0" in generate_latest(metrics.registry).decode()


def test_a_gauge_read_from_state_is_read_at_each_scrape():
    """`gateway_background_responses_running` is the background runs' own count, read
    when scraped (`Family.read_from`), never kept up to date by the turns."""
    metrics = Metrics()
    running = [object(), object()]
    metrics.metric("gateway_background_responses_running").read_from(lambda: len(running))
    assert "gateway_background_responses_running 2.0" in generate_latest(metrics.registry).decode()
    running.pop()
    assert b"gateway_background_responses_running 1.0" in metrics.exposition.render()
    with pytest.raises(ValueError):
        metrics.metric("gateway_turns_total").read_from(lambda: 1)


def test_pending_observations_fold_into_the_same_buckets_as_one_at_a_time():
    import random
    from bisect import bisect_left

    from gateway.observability.plain import FOLD_AT, Buckets
    bounds = LCORE_BUCKETS
    rng = random.Random(7)
    values = [rng.choice([rng.uniform(0, 200), *bounds]) for _ in range(3 * FOLD_AT + 5)]   # bounds themselves too
    child = Buckets(tuple(float(bound) for bound in bounds))
    expected = [0] * (len(bounds) + 1)
    for value in values:
        child.observe(value)
        expected[bisect_left(bounds, value)] += 1
    assert len(child.pending) == 5   # folded every FOLD_AT, the rest still pending
    child.fold()
    assert child.counts == expected and child.pending == []
    assert abs(child.sum - sum(values)) < 1e-6


def test_turn_metrics_never_raise_into_the_turn(caplog):
    """TurnMetrics is `shielded`: the runner calls it directly, so each of its moments
    catches and logs its own failure."""
    metrics = TurnMetrics(Metrics(), {})
    hooks = Hooks([metrics])
    assert hooks.finished == metrics.finished
    broken = SimpleNamespace(observed=[None, None, "not a time"], plan=SimpleNamespace(clock=0.0),
                             outcome=SimpleNamespace(result=None, abandoned=False))
    hooks.first_event(broken)
    hooks.finished(broken, None)
    hooks.streamed(broken, 3)
    assert "turn metrics: finished failed" in caplog.text


def _turn(outcome: str | None, stream: bool = False) -> SimpleNamespace:
    model = SimpleNamespace(id="openai/gpt-4o-mini", provider_id="openai")
    result = {"status": outcome, "output": [], "usage": {"input_tokens": 3, "output_tokens": 4}} if outcome else None
    plan = SimpleNamespace(backend="the forward backend", model=model, background=False, stream=stream,
                           reservation=None, clock=time.perf_counter(), blocked=None)
    return SimpleNamespace(plan=plan, outcome=SimpleNamespace(result=result, abandoned=False), observed=None,
                           observed_settled=True, events=0)


def test_llm_calls_and_failures_are_the_inference_observations():
    """`ls_llm_calls_total` and `ls_llm_calls_failures_total` are read from the inference
    histogram's counts (one observation per finished turn): exactly one per turn."""
    metrics = Metrics()
    hooks = TurnMetrics(metrics, {})
    for outcome, error in (("completed", None), ("incomplete", None), ("failed", None), (None, RuntimeError())):
        turn = _turn(outcome)
        hooks.first_event(turn)
        hooks.finished(turn, error)
    text = generate_latest(metrics.registry).decode()
    labels = 'endpoint="",model="gpt-4o-mini",provider="openai"'
    assert f"ls_llm_calls_total{{{labels}}} 4.0" in text
    assert f"ls_llm_calls_failures_total{{{labels}}} 2.0" in text   # failed, and the error
    assert f'ls_llm_inference_duration_seconds_count{{{labels},result="success"}} 2.0' in text
    assert f"ls_llm_token_sent_total{{{labels}}} 9.0" in text        # the three with a usage
    assert 'gateway_turns_total{backend="forward",mode="json",outcome="error"} 1.0' in text


def test_streams_open_close_only_once_they_had_a_first_event():
    metrics = Metrics()
    hooks = TurnMetrics(metrics, {})
    opened, refused = _turn("completed", stream=True), _turn(None, stream=True)
    hooks.first_event(opened)
    assert metrics.hot.streams_open["forward"] == 1
    for turn in (opened, refused):
        turn.events = 5   # the runner's count, set at the stream's end
        hooks.finished(turn, None)
    assert metrics.hot.streams_open["forward"] == 0 and metrics.hot.stream_events["forward"] == 10


def test_successful_authentications_are_the_checks_that_followed_them():
    """`ls_auth_attempts_total{result="success"}` is the sum of the route checks (and of
    the passes to routes with no action) that each successful authentication led to."""
    from gateway.observability.http import HttpObserver
    metrics = Metrics()
    observer = HttpObserver(metrics, "", "noop")
    observer.passed("query", True)
    observer.passed("query", False)
    observer.passed(None, True)
    observer.passed("responses", True)
    observer.authenticated("failure", "no_credential")
    text = generate_latest(metrics.registry).decode()
    assert 'ls_auth_attempts_total{auth_module="noop",reason="ok",result="success"} 4.0' in text
    assert 'ls_auth_attempts_total{auth_module="noop",reason="no_credential",result="failure"} 1.0' in text
    assert 'ls_authorization_checks_total{action="query",result="denied"} 1.0' in text
    assert 'ls_authorization_checks_total{action="query",result="allowed"} 1.0' in text
