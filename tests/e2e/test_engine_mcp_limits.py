"""What a client's own MCP server may send the engine (`client_tools.max_mcp_*`),
through `gateway serve` in engine mode with real MCP servers built with the `mcp`
package: a 22 MB, 20,000-tool listing is refused without the gateway reading it whole
(its resident memory stays bounded) and nothing of it is stored; too many tools, or a
tool defined at too great a length, fail the listing; the operator's servers are not
capped; and a tool's error output is cut like its output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.flows import checked
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK, FLOOD_TOOL_BYTES, FLOOD_TOOLS, running_mcp_server

ENGINE = {"max_retries": 0, "api": "chat_completions"}
# What reading the flood may add to the gateway's peak resident memory: the 4 MiB it
# reads at most, and what parsing and the turn cost. Before the cap the same listing
# took 396 MiB here (235 MB in the issue), and was stored in the conversation.
RSS_BOUND_MIB = 48


@pytest.fixture(scope="module")
def mcp(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-limits", slow=True)


@pytest.fixture(scope="module")
def flood(tmp_path_factory):
    yield from running_mcp_server(tmp_path_factory, "mcp-flood", flood=True)


def engine(gateway_factory, chat_upstream, mcp=None, **client_tools):
    servers = [{"name": "operators", "url": mcp.url}] if mcp is not None else []
    return gateway_factory(chat_upstream.url, llama_stack={"url": chat_upstream.url, **ENGINE},
                           client_tools={**CLIENT_MCP_ON_LOOPBACK, **client_tools}, mcp_servers=servers)


def own(url: str, label: str = "mine", **extra) -> dict:
    return {"type": "mcp", "server_label": label, "server_url": url, **extra}


def stream(gateway, body):
    status, frames = gateway.stream(body, timeout=60)
    assert status == 200, frames
    return checked(frames)


def memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_a_flooding_listing_is_refused_within_bounded_memory(gateway_factory, chat_upstream, mcp, flood):
    gateway = engine(gateway_factory, chat_upstream)
    pid = gateway.proc.popen.pid
    # Warm up: the first MCP turn loads the `mcp` package, which every later one reuses.
    for _ in range(2):
        warm = stream(gateway, {"input": "Use the add tool with 2 and 3", "tools": [own(mcp.url)]})
        assert warm[-1]["response"]["output"][1]["output"] == "5"
    before = memory_kib(pid, "VmRSS")
    events = stream(gateway, {"input": "Use the echo tool", "tools": [own(flood.url, "flood")]})
    peak = memory_kib(pid, "VmHWM")
    assert FLOOD_TOOLS * FLOOD_TOOL_BYTES > 20_000_000  # what the server sends, if read whole
    assert peak - before < RSS_BOUND_MIB * 1024, f"the listing took {(peak - before) >> 10} MiB"
    response = events[-1]["response"]
    listing, message = response["output"]
    assert listing["type"] == "mcp_list_tools" and listing["tools"] == []
    assert listing["error"] == ("MCP server 'flood' sent a response longer than 4194304 bytes, more than this "
                                "gateway reads from a client's MCP server")
    assert "response.mcp_list_tools.failed" in [event["type"] for event in events]
    # The model got no tool of it, and the turn went on.
    assert events[-1]["type"] == "response.completed" and message["type"] == "message"
    assert "tools" not in chat_upstream.requests("/v1/chat/completions")[-1]["body"]
    # Nothing of the listing is stored: the stored response is as small as the answer.
    stored = gateway.get(f"/v1/responses/{response['id']}")
    assert stored.status == 200 and len(stored.body) < 20_000


def test_too_many_tools_or_too_long_a_tool_fail_the_listing(gateway_factory, chat_upstream, mcp):
    few = engine(gateway_factory, chat_upstream, max_mcp_tools=5)
    listing = stream(few, {"input": "Use the add tool with 2 and 3", "tools": [own(mcp.url)]})[-1]["response"]["output"][0]
    assert listing["tools"] == [] and listing["error"] == (
        "MCP server 'mine' lists 7 tools; this gateway takes at most 5 from a client's MCP server")
    # `add` is defined in 365 bytes of JSON (name, description, input and output schema).
    short = engine(gateway_factory, chat_upstream, max_mcp_tool_schema_bytes=350)
    listing = stream(short, {"input": "Use the echo tool", "tools": [own(mcp.url)]})[-1]["response"]["output"][0]
    assert listing["tools"] == [] and listing["error"] == (
        "MCP server 'mine' defines tool 'add' in 365 bytes; this gateway takes at most 350 per tool "
        "from a client's MCP server")
    # Within the caps the same server lists as ever.
    enough = engine(gateway_factory, chat_upstream, max_mcp_tools=7, max_mcp_tool_schema_bytes=2048)
    events = stream(enough, {"input": "Use the add tool with 2 and 3", "tools": [own(mcp.url, allowed_tools=["add"])]})
    listing, call, _ = events[-1]["response"]["output"]
    assert [tool["name"] for tool in listing["tools"]] == ["add"] and call["output"] == "5"


def test_the_operators_servers_are_not_capped(gateway_factory, chat_upstream, mcp):
    gateway = engine(gateway_factory, chat_upstream, mcp, max_mcp_tools=1, max_mcp_tool_schema_bytes=256,
                     max_mcp_message_bytes=1024)
    events = stream(gateway, {"input": "Use the add tool with 2 and 3",
                              "tools": [{"type": "mcp", "server_label": "operators"}]})
    listing, call, _ = events[-1]["response"]["output"]
    assert len(listing["tools"]) == 7 and listing["error"] is None and call["output"] == "5"


def test_an_error_output_is_cut_like_an_output(gateway_factory, chat_upstream, mcp):
    """An `isError` result of 116,000 characters: 100,000 reach the item and the model."""
    gateway = engine(gateway_factory, chat_upstream, mcp)
    chat_upstream.clear()
    prompt = "Use the shout tool with 4000"  # the scripted model repeats the prompt 4,000 times
    events = stream(gateway, {"input": prompt, "tools": [{"type": "mcp", "server_label": "operators",
                                                          "allowed_tools": ["shout"]}]})
    call = events[-1]["response"]["output"][1]
    assert call["type"] == "mcp_call" and call["status"] == "failed"
    assert call["error"]["type"] == "mcp_tool_execution_error"
    (part,) = call["error"]["content"]
    note = "\n[output cut at 100000 characters]"
    assert len(part["text"]) == 100_000 + len(note) and part["text"].endswith(note)
    assert (prompt * 2) in part["text"]
    sent = chat_upstream.requests("/v1/chat/completions")[-1]["body"]["messages"][-1]
    assert sent["role"] == "tool" and len(sent["content"]) < 100_100 and sent["content"].endswith(note)
