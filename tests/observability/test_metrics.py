"""The metric definitions: names and labels follow the rules docs/operating.md states,
hot counters become samples only when scraped, ids never become labels; and what a turn
records (observability/turns.py; the calls out: test_calls.py, the middleware's:
test_http.py, the plain families: test_plain.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

from prometheus_client import generate_latest

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
    scraped = {"gateway_upstream_capability_mode", "gateway_db_pool_connections", "gateway_upstream_circuit_state",
               "gateway_upstream_connections", "gateway_asyncio_tasks"}   # registered with the state
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

