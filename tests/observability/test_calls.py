"""What the gateway's calls out record from their hooks: upstream paths collapsed to
operations, tool kinds to a bounded set, so ids never become labels."""

from __future__ import annotations

from prometheus_client import generate_latest

from gateway.observability.calls import EngineMetrics, UpstreamMetrics, operation
from gateway.observability.metrics import Metrics


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
