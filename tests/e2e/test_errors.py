"""Every error status this version can produce, with its body (docs/architecture.md, decisions 3
and 4: errors serve two audiences, validation before anything is created): LCORE's
`detail` exactly, OpenAI's `error` beside it on the endpoints OpenAI SDKs call (unless
`service.error_body: lcore`), and proof that a refused request changes nothing (no
upstream write, no row in the gateway's own database)."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest

from tests.support.gateway_db import Counts, GatewayDb
from tests.support.processes import free_port

MISSING = "conv_" + "0" * 48
LCORE_CASES = json.loads((Path(__file__).parents[1] / "fixtures" / "lcore" / "responses-validation.json").read_text())
REFUSED = [name for name, case in LCORE_CASES.items() if case["status"] == 422]
ACCEPTED = [name for name, case in LCORE_CASES.items() if case["status"] == 200]
EMPTY = Counts(conversations=0, turns=0)


def writes(upstream) -> list[dict]:
    """What the upstream received that creates or changes something (reads are probes)."""
    return [request for request in upstream.requests() if request["method"] != "GET"]


def assert_envelope(reply, status: int, response: str, error_type: str, code: str, param=None, cause=None):
    assert reply.status == status, reply.body
    data = reply.json()
    assert set(data) == {"detail", "error"}
    assert data["detail"]["response"] == response
    assert isinstance(data["detail"]["cause"], str) and data["detail"]["cause"]
    if cause is not None:
        assert data["detail"]["cause"] == cause
    assert data["error"]["type"] == error_type
    assert data["error"]["code"] == code
    assert data["error"]["param"] == param
    assert data["detail"]["cause"] in data["error"]["message"]
    return data


@pytest.fixture(scope="module")
def refusing(gateway_factory, upstream):
    """One gateway per `error_body` mode that only ever sees refused requests, so its
    database must stay empty."""
    return {mode: gateway_factory(upstream.url, service={"error_body": mode}) for mode in ("both", "lcore")}


def send(gateway, case: dict):
    if "raw_request" in case:
        return gateway.request("POST", "/v1/responses", raw=case["raw_request"].encode())
    return gateway.post("/v1/responses", case["request"])


@pytest.mark.parametrize("mode", ["both", "lcore"])
@pytest.mark.parametrize("name", REFUSED)
def test_422_exactly_as_lcore_and_nothing_changes(refusing, upstream, mode, name):
    gateway, case = refusing[mode], LCORE_CASES[name]
    upstream.clear()
    reply = send(gateway, case)
    assert reply.status == 422, reply.body
    if mode == "lcore":
        assert reply.json() == case["body"]
    else:
        assert reply.json()["detail"] == case["body"]["detail"]
        error = reply.json()["error"]
        assert error["type"] == "invalid_request_error" and error["message"].startswith("Invalid request: ")
    assert writes(upstream) == [], "a refused request must not create or send anything upstream"
    assert GatewayDb.of(gateway).counts() == EMPTY


@pytest.mark.parametrize("name", ACCEPTED)
def test_what_lcore_accepts_is_accepted(gateway, upstream, name):
    upstream.clear()
    request = LCORE_CASES[name]["request"]
    reply = send(gateway, LCORE_CASES[name])
    if request.get("conversation"):
        # A well-formed id of no conversation: past validation, then not found.
        assert reply.status == 404 and reply.json()["error"]["code"] == "conversation_not_found", reply.body
        return
    assert reply.status == 200, reply.body
    sent = upstream.last()["body"]
    for key, value in LCORE_CASES[name]["request"].items():
        if key in ("parallel_tool_calls", "stream", "temperature", "max_output_tokens"):
            # Lax values are forwarded converted, as LCORE forwards its validated model.
            assert sent[key] == {"yes": True, "false": False, "0.5": 0.5}.get(value, value)
            assert type(sent[key]) is not str


def test_422_for_a_configured_server_url_override_sends_nothing(gateway_factory, upstream, tmp_path):
    secret = tmp_path / "token"
    secret.write_text("operator-secret")
    configured = gateway_factory(upstream.url, mcp_servers=[
        {"name": "calc", "url": f"{upstream.url}/mcp", "authorization_headers": {"Authorization": str(secret)}}])
    upstream.clear()
    tools = [{"type": "mcp", "server_label": "calc", "server_url": "http://attacker.example/mcp"}]
    reply = configured.post("/v1/responses", {"input": "Use the add tool", "tools": tools})
    assert reply.status == 422, reply.body
    assert reply.json()["detail"] == [{
        "type": "value_error", "loc": ["body", "tools", 0, "mcp"],
        "msg": "Value error, server_url cannot be set for MCP server 'calc': its URL is configured by the operator",
        "input": tools[0], "ctx": {"error": {}}}]
    assert writes(upstream) == []
    assert GatewayDb.of(configured).counts() == EMPTY
    assert b"operator-secret" not in reply.body


def test_404_for_a_vector_store_not_configured(gateway_factory, upstream):
    rag = gateway_factory(upstream.url, byok_rag=[{"rag_id": "handbook", "vector_db_id": "vs_handbook"}])
    upstream.clear()
    tools = [{"type": "file_search", "vector_store_ids": ["handbook", "vs_other_tenant"]}]
    reply = rag.post("/v1/responses", {"input": "search", "tools": tools})
    assert_envelope(reply, 404, "Vector Store not found", "not_found_error", "vector_store_not_found", "tools",
                    "Vector store with ID vs_other_tenant does not exist")
    assert writes(upstream) == []
    assert GatewayDb.of(rag).counts() == EMPTY


def test_400_empty_user_id_is_lcores_plain_string(refusing):
    reply = refusing["lcore"].post("/v1/responses?user_id=", {"input": "hi"})
    assert reply.status == 400 and reply.json() == {"detail": "user_id cannot be empty"}
    reply = refusing["both"].post("/v1/responses?user_id=", {"input": "hi"})
    assert reply.status == 400 and reply.json()["detail"] == "user_id cannot be empty"
    assert reply.json()["error"]["code"] == "invalid_user_id"


def test_404_unknown_model_before_any_upstream_call(gateway, upstream):
    gateway.post("/v1/responses", {"input": "warm the catalog"})
    upstream.clear()
    reply = gateway.post("/v1/responses", {"input": "hi", "model": "no-such-model"})
    assert_envelope(reply, 404, "Model not found", "not_found_error", "model_not_found", "model",
                    "Model with ID no-such-model does not exist")
    # LCORE names the part after the provider.
    reply = gateway.post("/v1/responses", {"input": "hi", "model": "scripted/no-such-model"})
    assert reply.json()["detail"]["cause"] == "Model with ID no-such-model does not exist"
    assert upstream.requests("/v1/responses") == [] and upstream.requests("/v1/conversations") == []


def test_404_unknown_conversation(gateway, upstream):
    upstream.clear()
    reply = gateway.post("/v1/responses", {"input": "hi", "conversation": MISSING})
    assert_envelope(reply, 404, "Conversation not found", "not_found_error", "conversation_not_found",
                    "conversation", f"Conversation with ID {'0' * 48} does not exist")
    assert writes(upstream) == []


def test_404_unknown_previous_response(gateway):
    reply = gateway.post("/v1/responses", {"input": "hi", "previous_response_id": "resp_doesnotexist"})
    assert_envelope(reply, 404, "Response not found", "not_found_error", "response_not_found",
                    "previous_response_id", "Response with ID resp_doesnotexist does not exist")


def test_403_other_users_conversation_and_404_for_their_responses(gateway, upstream):
    mine = gateway.post("/v1/responses?user_id=alice", {"input": "alice's secret"}).json()
    upstream.clear()
    # LCORE's rbac e2e compares the whole body, the id as /v1/responses returned it
    # (`conv_<48 hex>`), in JSON and stream mode, whichever form the request named.
    for conversation, stream in ((mine["conversation"], False), (mine["conversation"], True),
                                 (mine["conversation"][5:], False)):
        reply = gateway.post("/v1/responses?user_id=bob", {"input": "let me in", "conversation": conversation,
                                                           "stream": stream})
        assert_envelope(reply, 403, "User does not have permission to perform this action", "permission_error",
                        "conversation_forbidden", "conversation",
                        f"User bob does not have permission to read conversation with ID {mine['conversation']}")
        assert reply.headers["content-type"].startswith("application/json")
    assert writes(upstream) == []
    # Another user's response id is indistinguishable from an unknown one.
    for method, path in (("POST", None), ("GET", f"/v1/responses/{mine['id']}"),
                         ("GET", f"/v1/responses/{mine['id']}/input_items"),
                         ("DELETE", f"/v1/responses/{mine['id']}")):
        if method == "POST":
            reply = gateway.post("/v1/responses?user_id=bob", {"input": "x", "previous_response_id": mine["id"]})
        else:
            reply = gateway.request(method, path + "?user_id=bob")
        assert reply.status == 404, (method, path, reply.body)
    assert gateway.get(f"/v1/responses/{mine['id']}?user_id=alice").status == 200


def test_413_body_too_large(gateway_factory, upstream):
    small = gateway_factory(upstream.url, service={"max_request_body_bytes": 2048})
    reply = small.post("/v1/responses", {"input": "x" * 5000})
    assert_envelope(reply, 413, "Request body is too large", "invalid_request_error", "request_too_large",
                    cause="The request body exceeds the limit of 2048 bytes.")


def test_413_context_length_from_upstream(gateway):
    reply = gateway.post("/v1/responses", {"input": "please context-overflow now"})
    assert_envelope(reply, 413, "Prompt is too long", "invalid_request_error", "context_length_exceeded",
                    "input", "The input exceeds the context window size of model 'scripted-chat'.")


def test_500_upstream_failure(gateway):
    reply = gateway.post("/v1/responses", {"input": "please fail-upstream"})
    assert_envelope(reply, 500, "Internal server error", "server_error", "upstream_error")
    assert "scripted upstream failure" in reply.json()["detail"]["cause"]


def test_upstream_4xx_keeps_status_with_upstream_message(gateway, upstream):
    first = gateway.post("/v1/responses", {"input": "one"}).json()
    gateway.post("/v1/responses", {"input": "two", "conversation": first["conversation"]})
    # The upstream lost the older response behind the gateway's back: forking from it
    # gets the upstream's 404, passed on with the upstream's message as the cause.
    assert upstream.delete(f"/v1/responses/{first['id']}").status == 200
    reply = gateway.post("/v1/responses", {"input": "fork", "previous_response_id": first["id"]})
    assert_envelope(reply, 404, "Not found", "not_found_error", "upstream_not_found")
    assert f"Response '{first['id']}' not found" in reply.json()["detail"]["cause"]
    reply = gateway.get(f"/v1/responses/{first['id']}")
    assert_envelope(reply, 404, "Not found", "not_found_error", "upstream_not_found")
    # Streamed, Llama Stack refuses it inside a 200 stream: nothing was sent to the client
    # yet, so the client still gets the status.
    reply = gateway.post("/v1/responses", {"input": "fork", "previous_response_id": first["id"], "stream": True})
    assert_envelope(reply, 404, "Not found", "not_found_error", "upstream_not_found")
    assert reply.headers["content-type"].startswith("application/json")


def test_upstream_5xx_becomes_500(gateway):
    tools = [{"type": "mcp", "server_label": "gone", "server_url": "http://unreachable.invalid/mcp"}]
    reply = gateway.post("/v1/responses", {"input": "Use the add tool", "tools": tools})
    assert_envelope(reply, 500, "Internal server error", "server_error", "upstream_error")
    assert "Failed to connect to MCP server" in reply.json()["detail"]["cause"]


def test_503_upstream_unreachable_as_lcore_says_it(gateway_factory, upstream):
    # A warm catalog does not hide an unreachable upstream from /v1/models.
    port = free_port()
    dead = gateway_factory(f"http://127.0.0.1:{port}")
    reply = dead.post("/v1/responses", {"input": "hi"})
    assert_envelope(reply, 503, "Unable to connect to Llama Stack", "server_error", "upstream_unavailable",
                    cause="Connection error.")
    assert f"unreachable: Connection error: 127.0.0.1:{port}: Connection refused" in dead.log(), \
        "the socket's reason belongs in the log"
    assert dead.get("/v1/models").json()["detail"] == {"response": "Unable to connect to Llama Stack",
                                                        "cause": "Connection error."}
    # /v1/info is an LCORE-only endpoint: LCORE's body, exactly.
    reply = dead.get("/v1/info")
    assert reply.status == 503
    assert reply.json() == {"detail": {"response": "Unable to connect to Llama Stack", "cause": "Connection error."}}
    with pytest.raises(openai.InternalServerError) as caught:
        dead.client().responses.create(input="hi")
    assert caught.value.status_code == 503
    assert "Unable to connect to Llama Stack" in str(caught.value)


def test_503_names_the_configured_backend(gateway_factory):
    ogx = gateway_factory(f"http://127.0.0.1:{free_port()}", service={"error_body": "lcore"},
                          llama_stack={"url": f"http://127.0.0.1:{free_port()}", "max_retries": 0,
                                       "display_name": "OGX"})
    reply = ogx.post("/v1/responses", {"input": "hi"})
    assert reply.status == 503
    assert reply.json() == {"detail": {"response": "Unable to connect to OGX", "cause": "Connection error."}}


def test_503_models_even_with_a_warm_catalog(gateway_factory, upstream_with):
    doomed = upstream_with("--no-record")
    gateway = gateway_factory(doomed.url)
    assert gateway.post("/v1/responses", {"input": "warm"}).status == 200
    doomed.stop()
    assert gateway.get("/v1/models").status == 503
    assert gateway.get("/v1/info").status == 503


def test_503_upstream_idle_timeout(gateway_factory, upstream):
    impatient = gateway_factory(upstream.url, llama_stack={"url": upstream.url, "max_retries": 0, "timeout": 1})
    reply = impatient.post("/v1/responses", {"input": "please hang-upstream"})
    assert_envelope(reply, 503, "Unable to connect to Llama Stack", "server_error", "upstream_unavailable",
                    cause="Request timed out.")


def test_404_and_405_for_unknown_routes_as_fastapi(gateway, refusing):
    assert refusing["lcore"].get("/v1/nope").json() == {"detail": "Not Found"}
    reply = refusing["lcore"].request("PUT", "/v1/responses")
    assert reply.status == 405 and reply.json() == {"detail": "Method Not Allowed"}
    reply = gateway.request("PUT", "/v1/responses")
    assert reply.status == 405 and reply.json()["detail"] == "Method Not Allowed"
    assert reply.json()["error"]["code"] == "method_not_allowed" and "allow" in reply.headers


def test_openai_sdk_exceptions_carry_the_message(gateway):
    client = gateway.client()
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        client.responses.create(input="hi", extra_body={"bogus": 1})
    assert caught.value.body["code"] == "unknown_parameter"
    with pytest.raises(openai.NotFoundError) as caught:
        client.responses.create(input="hi", model="no-such-model")
    assert "Model with ID no-such-model does not exist" in caught.value.message
