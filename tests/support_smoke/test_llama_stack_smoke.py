"""The whole test chain works: scripted upstream -> real Llama Stack 0.7.3 -> MCP server.

    scripts/llama-stack/setup.sh
    .venv/bin/python -m pytest tests/support_smoke -q -m llama_stack
"""

from __future__ import annotations

import importlib.util
import json
import time

import openai
import pytest
from openai import OpenAI

from tests.support.llama_stack import (
    CHAT_MODEL,
    LLAMA_STACK_SKIP_REASON,
    llama_stack_installed,
    start_llama_stack,
)
from tests.support.mcp_server import clear_recorded_requests, recorded_requests, start_mcp_server
from tests.support.processes import free_port, python_module, spawn, wait_http

pytestmark = [
    pytest.mark.llama_stack,
    pytest.mark.skipif(not llama_stack_installed(), reason=LLAMA_STACK_SKIP_REASON),
    pytest.mark.skipif(importlib.util.find_spec("gateway.devserver.__main__") is None,
                       reason="the scripted upstream (python -m gateway.devserver) is missing"),
]

ADD_PROMPT = "Use the add tool to add two numbers"


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("llama-stack-smoke")


@pytest.fixture(scope="module")
def upstream(log_dir):
    port = free_port()
    proc = spawn("scripted-upstream",
                 python_module("gateway.devserver", "--host", "127.0.0.1", "--port", str(port)),
                 log_dir)
    proc.url = f"http://127.0.0.1:{port}"
    try:
        wait_http(proc, proc.url + "/health", timeout=30, ok=lambda status: status == 200)
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def mcp_server(log_dir):
    proc = start_mcp_server(log_dir)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def llama_stack(upstream, log_dir):
    started = time.monotonic()
    proc = start_llama_stack(log_dir / "stack", upstream.url, log_dir)
    print(f"\nLlama Stack healthy in {time.monotonic() - started:.1f} s at {proc.url}")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(llama_stack):
    return OpenAI(base_url=llama_stack.url + "/v1", api_key="none", max_retries=0, timeout=60)


def mcp_tool(mcp_server, **extra):
    return {"type": "mcp", "server_label": "calc", "server_url": mcp_server.url,
            "require_approval": "never", **extra}


def test_models_are_prefixed_with_the_provider(client):
    ids = {model.id for model in client.models.list()}
    assert CHAT_MODEL in ids


def test_plain_response(client):
    response = client.responses.create(model=CHAT_MODEL, input="Hello")
    assert response.status == "completed"
    assert response.output_text.startswith("Scripted reply")
    assert "Hello" in response.output_text


def test_streamed_response(client):
    events = list(client.responses.create(model=CHAT_MODEL, input="Hello stream", stream=True))
    types = [event.type for event in events]
    assert types[0] == "response.created"
    assert types[-1] == "response.completed"
    text = "".join(event.delta for event in events if event.type == "response.output_text.delta")
    assert text.startswith("Scripted reply")
    assert events[-1].response.output_text == text


def test_mcp_tool_call_forwards_headers(client, mcp_server):
    clear_recorded_requests(mcp_server)
    response = client.responses.create(
        model=CHAT_MODEL, input=ADD_PROMPT,
        tools=[mcp_tool(mcp_server, headers={"X-Api-Key": "secret-1"})])

    assert [item.type for item in response.output] == ["mcp_list_tools", "mcp_call", "message"]
    listed = {tool.name for tool in response.output[0].tools}
    assert {"add", "echo"} <= listed
    call = response.output[1]
    assert call.name == "add" and call.server_label == "calc" and call.error is None
    args = json.loads(call.arguments)
    assert call.output == str(args["a"] + args["b"])

    records = recorded_requests(mcp_server)
    assert records, "Llama Stack never reached the MCP server"
    assert all(record["headers"].get("x-api-key") == "secret-1" for record in records)
    bodies = [json.loads(r["body"]) for r in records if r["method"] == "POST" and r["body"]]
    assert any(body.get("method") == "tools/call" for body in bodies)


def test_mcp_authorization_parameter_becomes_a_bearer_header(client, mcp_server):
    """Llama Stack 0.7.3 sends the tool's `authorization` as `Authorization: Bearer <it>`."""
    clear_recorded_requests(mcp_server)
    response = client.responses.create(
        model=CHAT_MODEL, input=ADD_PROMPT, tools=[mcp_tool(mcp_server, authorization="tok-1")])
    assert response.output[1].type == "mcp_call"
    records = recorded_requests(mcp_server)
    assert records
    assert all(record["headers"].get("authorization") == "Bearer tok-1" for record in records)


def test_mcp_authorization_in_headers_is_rejected(client, mcp_server):
    """...and refuses an Authorization entry in `headers` (any case) with a 400."""
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.responses.create(
            model=CHAT_MODEL, input=ADD_PROMPT,
            tools=[mcp_tool(mcp_server, headers={"Authorization": "Bearer tok-1"})])
    assert "authorization" in excinfo.value.response.text
