"""The stand-in against the real thing: same requests to a real Llama Stack 0.7.3 (with
this devserver as its inference backend) and to the devserver's own Llama Stack
dialect; after replacing ids and timestamps, the bodies must be the same bytes.

    scripts/llama-stack/setup.sh
    .venv/bin/python -m pytest tests/devserver -q -m llama_stack
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from tests.support.llama_stack import (LLAMA_STACK_SKIP_REASON, llama_stack_installed,
                                       start_llama_stack)
from tests.support.mcp_server import start_mcp_server
from tests.support.processes import free_port, python_module, spawn, wait_http

from .helpers import CHAT, normalise

pytestmark = [pytest.mark.llama_stack,
              pytest.mark.skipif(not llama_stack_installed(), reason=LLAMA_STACK_SKIP_REASON)]

WEATHER = [{"type": "function", "name": "get_weather", "description": "Get the weather",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}},
                           "required": ["location"]}}]


@pytest.fixture(scope="module")
def log_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("devserver-vs-llama-stack")


@pytest.fixture(scope="module")
def upstream(log_dir):
    port = free_port()
    proc = spawn("scripted-upstream", python_module("gateway.devserver", "--port", str(port)),
                 log_dir)
    proc.url = f"http://127.0.0.1:{port}"
    try:
        wait_http(proc, proc.url + "/health", ok=lambda status: status == 200)
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def mcp_url(log_dir):
    proc = start_mcp_server(log_dir)
    try:
        yield proc.url
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def stack(upstream, log_dir):
    proc = start_llama_stack(log_dir / "stack", upstream.url, log_dir)
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
async def both(upstream, stack):
    """(real Llama Stack URL, stand-in URL)."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        yield session, stack.url, upstream.url


Scenario = Callable[[aiohttp.ClientSession, str], Awaitable[list[str]]]


async def _post(session, base, body):
    async with session.post(base + "/v1/responses", json={"model": CHAT, **body}) as resp:
        return resp.status, await resp.text()


def _sorted_schemas(value):
    if isinstance(value, dict):
        return {k: (json.loads(json.dumps(v, sort_keys=True)) if k == "input_schema"
                    else _sorted_schemas(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_sorted_schemas(v) for v in value]
    return value


def mcp_schema_order(text: str) -> str:
    """Sort the keys of MCP input schemas: the test MCP server (mcp 2.x) orders them
    differently from the FastMCP 1.x server the stand-in copies."""
    def canon(payload: str) -> str:
        try:
            return json.dumps(_sorted_schemas(json.loads(payload)), separators=(",", ":"))
        except ValueError:
            return payload
    if text.startswith("data: "):
        return "".join("data: " + canon(block[6:]) + "\n\n"
                       for block in text.split("\n\n") if block)
    return canon(text)


async def compare(both, scenario: Scenario, canon=lambda text: text) -> list[str]:
    session, real, ours = both
    expected = [normalise(canon(x)) for x in await scenario(session, real)]
    got = [normalise(canon(x)) for x in await scenario(session, ours)]
    for want, have in zip(expected, got):
        assert have == want
    assert len(got) == len(expected)
    return got


def single(body):
    async def scenario(session, base):
        status, text = await _post(session, base, body)
        return [str(status), text]
    return scenario


@pytest.mark.parametrize("body", [
    {"input": "Hello there"},
    {"input": "Hello there, streaming", "stream": True},
    {"instructions": "You are terse.", "metadata": {"suite": "gateway"}, "temperature": 0.2,
     "max_output_tokens": 64, "input": [{"type": "message", "role": "user",
                                         "content": [{"type": "input_text", "text": "Hi"}]}]},
    {"input": "What is the weather in Paris? Use the tool.", "tools": WEATHER},
    {"input": "What is the weather in Paris? Use the tool.", "tools": WEATHER, "stream": True},
    {"input": "not stored", "store": False},
    {"input": "please fail-upstream"},
    {"input": "please fail-upstream", "stream": True},
    {"input": "hi", "model": "scripted/ghost-model"},
    {"input": "hi", "model": "scripted/ghost-model", "stream": True},
    {"input": "hi", "model": "no-such-model"},
    {"input": "hi", "model": "no-such-model", "stream": True},
    {"input": "context-overflow", "stream": True},
    {"input": "hi", "conversation": "nope"},
    {"input": "hi", "conversation": "conv_" + "0" * 48},
    {"input": "hi", "previous_response_id": "resp_doesnotexist"},
    {"input": 42},
    {"model": CHAT},
    {"input": "hi", "tools": [{"type": "bogus"}]},
], ids=lambda body: json.dumps(body)[:60])
async def test_single_request(both, body):
    await compare(both, single(body))


async def test_previous_response_chain_and_input_items(both):
    async def scenario(session, base):
        out = []
        previous = None
        for text, stream in (("Hello there", False), ("Second turn", False),
                             ("Third turn, streaming", True)):
            body = {"input": text, "stream": stream}
            if previous:
                body["previous_response_id"] = previous
            status, body_text = await _post(session, base, body)
            out.append(body_text)
            last = body_text if not stream else body_text.strip().rsplit("data: ", 1)[1]
            previous = json.loads(last).get("id") or json.loads(last)["response"]["id"]
        async with session.get(f"{base}/v1/responses/{previous}/input_items") as resp:
            out.append(await resp.text())
        return out
    await compare(both, scenario)


async def test_function_call_output_round_trip(both):
    async def scenario(session, base):
        _, first = await _post(session, base, {"input": "Use the tool for Rome", "tools": WEATHER})
        call = json.loads(first)["output"][0]
        _, second = await _post(session, base, {
            "previous_response_id": json.loads(first)["id"], "tools": WEATHER, "stream": True,
            "input": [{"type": "function_call_output", "call_id": call["call_id"],
                       "output": '{"temp_c": 21}'}]})
        return [first, second]
    await compare(both, scenario, mcp_schema_order)


async def test_conversation_turns(both):
    async def scenario(session, base):
        async with session.post(base + "/v1/conversations", json={
                "metadata": {"topic": "demo"},
                "items": [{"type": "message", "role": "user", "content": "Seed"}]}) as resp:
            conv_text = await resp.text()
        conv = json.loads(conv_text)
        _, first = await _post(session, base, {"input": "First turn", "conversation": conv["id"]})
        _, second = await _post(session, base, {"input": "Second turn", "stream": True,
                                                "conversation": conv["id"]})
        async with session.get(f"{base}/v1/responses/{json.loads(first)['id']}/input_items") as r:
            items = await r.text()
        return [conv_text, first, second, items]
    await compare(both, scenario)


@pytest.mark.parametrize("approval", ["never", "always"])
@pytest.mark.parametrize("stream", [False, True])
async def test_mcp(both, mcp_url, approval, stream):
    tools = [{"type": "mcp", "server_label": "calc", "server_url": mcp_url,
              "require_approval": approval}]
    await compare(both, single({"input": "Use the add tool to add two numbers", "tools": tools,
                                "stream": stream}), mcp_schema_order)


@pytest.mark.parametrize("approve", [True, False])
async def test_mcp_approval_response(both, mcp_url, approve):
    tools = [{"type": "mcp", "server_label": "calc", "server_url": mcp_url,
              "require_approval": "always"}]

    async def scenario(session, base):
        _, first = await _post(session, base, {"input": "Use the add tool to add two numbers",
                                               "tools": tools})
        first_body = json.loads(first)
        _, second = await _post(session, base, {
            "previous_response_id": first_body["id"], "tools": tools,
            "input": [{"type": "mcp_approval_response", "approve": approve,
                       "approval_request_id": first_body["output"][-1]["id"]}]})
        return [first, second]
    await compare(both, scenario, mcp_schema_order)


async def test_file_search_event_flow(both):
    """Results and the final text differ (ours are made up); the flow and numbering do not."""
    session, real, ours = both
    form = aiohttp.FormData()
    form.add_field("purpose", "assistants")
    form.add_field("file", b"Gateway handbook.\nThe secret launch code for project Falcon is "
                           b"7-alpha-9.\n", filename="handbook.txt", content_type="text/plain")
    async with session.post(real + "/v1/files", data=form) as resp:
        file_id = (await resp.json())["id"]
    async with session.post(real + "/v1/vector_stores",
                            json={"name": "handbook", "file_ids": [file_id]}) as resp:
        store_id = (await resp.json())["id"]
    flows = []
    for base in (real, ours):
        _, text = await _post(session, base, {
            "input": "search the handbook for the Falcon launch code", "stream": True,
            "tools": [{"type": "file_search", "vector_store_ids": [store_id]}]})
        events = [json.loads(block[6:]) for block in text.split("\n\n") if block]
        flows.append([(e["type"], e["sequence_number"], list(e)) for e in events
                      if e["type"] != "response.output_text.delta"])
        final = events[-1]["response"]
        assert [i["type"] for i in final["output"]] == ["file_search_call", "message"]
        assert list(final["output"][0]["results"][0]) == ["attributes", "file_id", "filename",
                                                          "score", "text"]
    real_flow, our_flow = flows
    # sequence numbers after the deltas differ with the text length; compare up to them
    assert our_flow[:13] == real_flow[:13]
    assert [t for t, _, _ in our_flow] == [t for t, _, _ in real_flow]
