"""Traces through `gateway serve` with tracing turned on by the standard OTEL_*
variables, exported over OTLP/HTTP to a receiver that decodes the protobuf
(tests/support/otlp_receiver.py): the span tree of a streamed engine turn with an MCP
tool call (a real MCP server) and of a forwarded turn, the client's `traceparent`
reaching the upstream and the MCP server, and no prompt text in any span. The other
outbound calls carry it too: the engine's web_search endpoint (its own client) and
LCORE's OAuth probe of an MCP server, the JWKS fetch of `jwk-token` and the `k8s`
module's reviews (aiohttp sessions)."""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.support.auth_peers import FakeKubeApi, JwksServer, SigningKey, TestCa, claims
from tests.support.engine_gateway import engine_config
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, running_mcp_server
from tests.support.otlp_receiver import start_receiver
from tests.support.search_server import recorded_searches, running_search_server

PROMPT = "Use the add tool with 2 and 3"
SERVER, CLIENT = 2, 3   # the protobuf's SpanKind values
LIMITS = [{"name": "daily", "type": "user_limiter", "initial_quota": 100000, "quota_increase": 0,
           "period": "1 day"}]


@pytest.fixture(scope="module")
def receiver(tmp_path_factory):
    proc, url = start_receiver(tmp_path_factory.mktemp("otlp"))
    yield url
    proc.stop()


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-traced")


def otel_env(receiver: str) -> dict[str, str]:
    return {"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": receiver, "OTEL_BSP_SCHEDULE_DELAY": "50",
            "OTEL_SERVICE_NAME": "gateway-under-test", "OTEL_ANONYMIZATION_SECRET": "test-anonymisation-key"}


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    yield from running_search_server(tmp_path_factory)


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, mcp, search, receiver, tmp_path_factory):
    quota = {"sqlite": {"db_path": str(tmp_path_factory.mktemp("traced-quota") / "q.db")}, "limiters": LIMITS}
    return gateway_factory(chat_upstream.url, env=otel_env(receiver), quota_handlers=quota,
                           mcp_servers=[{"name": "calc", "url": mcp.url}],
                           **engine_config(chat_upstream.url, web_search={"url": search.url, "timeout": 2}))


class _OAuthProtected(BaseHTTPRequestHandler):
    """An MCP server that wants OAuth: every request is a 401 with a challenge."""
    seen: list[dict[str, str]] = []

    def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append({name.lower(): value for name, value in self.headers.items()})
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer resource_metadata="http://127.0.0.1/x"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def probed(gateway_factory, upstream, receiver):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OAuthProtected)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
    yield gateway_factory(upstream.url, env=otel_env(receiver), mcp_servers=[
        {"name": "secure", "url": url, "authorization_headers": {"Authorization": "oauth"}}])
    server.shutdown()


@pytest.fixture(scope="module")
def forward(gateway_factory, upstream, receiver):
    return gateway_factory(upstream.url, env=otel_env(receiver))


def traceparent() -> tuple[str, str, str]:
    trace_id, parent = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{parent}-01", trace_id, parent


def spans_of(receiver: str, trace_id: str, done) -> list[dict[str, Any]]:
    """The trace's spans once `done(spans)` holds (the exporter sends every 50 ms)."""
    deadline = time.monotonic() + 15
    while True:
        with urllib.request.urlopen(f"{receiver}/_spans", timeout=5) as reply:
            every = json.loads(reply.read())
        spans = [span for span in every if span["trace_id"] == trace_id]
        if done(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.1)


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [span for span in spans if span["name"] == name]


def children(spans: list[dict[str, Any]], parent: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for span in spans if span["parent_span_id"] == parent["span_id"]]


def all_spans(receiver: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{receiver}/_spans", timeout=5) as reply:
        return json.loads(reply.read())


def test_engine_stream_with_an_mcp_call(engine, chat_upstream, mcp, receiver):
    header, trace_id, client_parent = traceparent()
    clear_recorded_requests(mcp)
    status, frames = engine.stream({"input": PROMPT, "tools": [{"type": "mcp", "server_label": "calc"}]},
                                   headers={"traceparent": header, "X-Request-ID": "traced-engine-1"})
    assert status == 200
    assert frames[-2][1]["type"] == "response.completed"
    spans = spans_of(receiver, trace_id, lambda found: bool(named(found, "POST /v1/responses")))
    # The request's span continues the client's trace.
    [request] = named(spans, "POST /v1/responses")
    assert request["kind"] == SERVER and request["parent_span_id"] == client_parent
    assert request["service"] == "gateway-under-test"
    attributes = request["attributes"]
    assert attributes["http.route"] == "/v1/responses" and attributes["http.response.status_code"] == 200
    assert attributes["gateway.request_id"] == "traced-engine-1"
    assert attributes["gen_ai.usage.input_tokens"] > 0 and attributes["gen_ai.usage.output_tokens"] > 0
    assert len(attributes["enduser.pseudo.id"]) == 64   # the keyed hash
    assert "gateway.first_event_ms" in attributes
    under = {span["name"] for span in children(spans, request)}
    assert {"authenticate", "quota reserve", "engine round", "tool mcp"} <= under, under
    # Each model round is a span with its upstream call under it; the call's context is
    # what the upstream received as traceparent, and the request id went with it.
    rounds = named(spans, "engine round")
    assert len(rounds) == 2
    calls = [call for model_round in rounds for call in children(spans, model_round)]
    assert [call["name"] for call in calls] == ["upstream chat_completions"] * 2
    assert all(call["kind"] == CLIENT and call["attributes"]["http.response.status_code"] == 200 for call in calls)
    received = [r for r in chat_upstream.requests("/v1/chat/completions")
                if r["headers"].get("traceparent", "").startswith(f"00-{trace_id}-")]
    assert sorted(r["headers"]["traceparent"].split("-")[2] for r in received) == sorted(
        call["span_id"] for call in calls)
    assert {r["headers"].get("x-request-id") for r in received} == {"traced-engine-1"}
    # The tool call's span is the parent of the `mcp` package's own spans, and the MCP
    # server got the trace in its requests' `_meta`.
    [tool] = named(spans, "tool mcp")
    mcp_spans = [span for span in spans if span["scope"] == "mcp-python-sdk"]
    assert mcp_spans and any(span["parent_span_id"] == tool["span_id"] for span in mcp_spans)
    metas = [json.loads(record["body"]).get("params", {}).get("_meta", {})
             for record in recorded_requests(mcp) if record.get("body", "").startswith("{")]
    assert any(meta.get("traceparent", "").startswith(f"00-{trace_id}-") for meta in metas), metas
    # The group commit is a span of its own, linked to the turn's.
    commits = [span for span in all_spans(receiver) if span["name"] == "db commit turns"
               and any(link["trace_id"] == trace_id for link in span["links"])]
    assert commits and commits[0]["trace_id"] != trace_id and commits[0]["parent_span_id"] == ""
    # No prompt text in any span (observability.trace_content is off).
    assert not [span["name"] for span in all_spans(receiver) if "add tool" in json.dumps(span["attributes"])]


def test_forwarded_turn(forward, upstream, receiver):
    header, trace_id, client_parent = traceparent()
    reply = forward.post("/v1/responses", {"input": "Hello traced world"},
                         headers={"traceparent": header, "X-Request-ID": "traced-forward-1"})
    assert reply.status == 200, reply.body
    spans = spans_of(receiver, trace_id, lambda found: bool(named(found, "POST /v1/responses")))
    [request] = named(spans, "POST /v1/responses")
    assert request["parent_span_id"] == client_parent
    under = [span["name"] for span in children(spans, request)]
    assert "authenticate" in under and "upstream responses" in under, under
    [call] = named(spans, "upstream responses")
    sent = upstream.last()
    assert sent["headers"]["traceparent"] == f"00-{trace_id}-{call['span_id']}-01"
    assert sent["headers"]["x-request-id"] == "traced-forward-1"
    assert not [span["name"] for span in all_spans(receiver) if "Hello traced" in json.dumps(span["attributes"])]


def test_the_engines_web_search_call_carries_the_trace(engine, search, receiver):
    header, trace_id, _ = traceparent()
    status, frames = engine.stream({"input": "search the web for traced news", "tools": [{"type": "web_search"}]},
                                   headers={"traceparent": header, "X-Request-ID": "traced-search-1"})
    assert status == 200 and frames[-2][1]["type"] == "response.completed"
    spans = spans_of(receiver, trace_id, lambda found: bool(named(found, "web search service"))
                     and bool(named(found, "tool web_search")))
    [tool] = named(spans, "tool web_search")
    [call] = named(spans, "web search service")
    assert call["kind"] == CLIENT and call["parent_span_id"] == tool["span_id"]
    assert call["attributes"]["http.response.status_code"] == 200
    [sent] = [r for r in recorded_searches(search) if r["headers"].get("x-request-id") == "traced-search-1"]
    assert sent["headers"]["traceparent"] == f"00-{trace_id}-{call['span_id']}-01"


def test_the_oauth_probe_carries_the_trace(probed, receiver):
    header, trace_id, client_parent = traceparent()
    _OAuthProtected.seen.clear()
    reply = probed.post("/v1/responses", {"input": "hello"},
                        headers={"traceparent": header, "X-Request-ID": "traced-probe-1"})
    assert reply.status == 401
    spans = spans_of(receiver, trace_id, lambda found: bool(named(found, "mcp oauth probe"))
                     and bool(named(found, "POST /v1/responses")))
    [request] = named(spans, "POST /v1/responses")
    [probe] = named(spans, "mcp oauth probe")
    assert request["parent_span_id"] == client_parent and probe["parent_span_id"] == request["span_id"]
    assert probe["kind"] == CLIENT and probe["attributes"]["http.response.status_code"] == 401
    [seen] = _OAuthProtected.seen
    assert seen["traceparent"] == f"00-{trace_id}-{probe['span_id']}-01"
    assert seen["x-request-id"] == "traced-probe-1"


def test_the_jwks_fetch_carries_the_trace(gateway_factory, upstream, receiver):
    key = SigningKey.rsa("traced-key")
    jwks = JwksServer(key)
    try:
        gateway = gateway_factory(upstream.url, env=otel_env(receiver), authentication={
            "module": "jwk-token", "jwk_config": {"url": jwks.url, "issuer": "https://issuer.test",
                                                  "audience": "gateway",
                                                  "jwt_configuration": {"user_id_claim": "sub",
                                                                        "username_claim": "preferred_username"}}})
        header, trace_id, _ = traceparent()
        reply = gateway.post("/v1/responses", {"input": "hello"},
                             headers={"traceparent": header, "Authorization": f"Bearer {key.sign(claims(sub='u'))}"})
        assert reply.status == 200, reply.body
        spans = spans_of(receiver, trace_id, lambda found: bool(named(found, "jwks fetch"))
                         and bool(named(found, "authenticate")))
        [authenticate] = named(spans, "authenticate")
        [fetch] = named(spans, "jwks fetch")
        assert fetch["kind"] == CLIENT and fetch["parent_span_id"] == authenticate["span_id"]
        assert jwks.headers[0]["traceparent"] == f"00-{trace_id}-{fetch['span_id']}-01"
    finally:
        jwks.close()


def test_the_kubernetes_reviews_carry_the_trace(gateway_factory, upstream, receiver, tmp_path):
    kube = FakeKubeApi(TestCa(tmp_path / "ca"), users={"alice-token": {"username": "alice", "uid": "uid-alice"}},
                       allowed={"alice"})
    try:
        (tmp_path / "sa").write_text("gateway-sa-token\n")
        gateway = gateway_factory(upstream.url, env=otel_env(receiver), authentication={
            "module": "k8s", "k8s_cluster_api": kube.url, "k8s_ca_cert_path": str(kube.ca.ca_path),
            "k8s_token_path": str(tmp_path / "sa")})
        header, trace_id, _ = traceparent()
        reply = gateway.post("/v1/responses", {"input": "hello"},
                             headers={"traceparent": header, "Authorization": "Bearer alice-token"})
        assert reply.status == 200, reply.body
        reviews = [review for review in kube.reviews if review["kind"] != "ClusterVersion"]
        assert [review["kind"] for review in reviews] == ["TokenReview", "SubjectAccessReview"]
        spans = spans_of(receiver, trace_id, lambda found: len(named(found, "kubernetes api")) >= 2
                         and bool(named(found, "authenticate")))
        [authenticate] = named(spans, "authenticate")
        calls = named(spans, "kubernetes api")
        assert all(call["kind"] == CLIENT and call["parent_span_id"] == authenticate["span_id"] for call in calls)
        assert sorted(review["traceparent"] for review in reviews) == sorted(
            f"00-{trace_id}-{call['span_id']}-01" for call in calls)
    finally:
        kube.close()
