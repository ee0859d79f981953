"""Parity for MCP: the local engine (its MCP executor, over the scripted Chat
Completions upstream) and forward mode in front of a real Llama Stack 0.7.3 (its own
loop over the same upstream and the same real MCP server), both through `gateway
serve`, give the same output item types and event types in the same order.

Allowed differences (besides those of test_engine_parity.py), each with its reason:
- Llama Stack streams an MCP call's arguments before announcing the item, as
  function-call events; the gateway's forward mode repairs that into OpenAI's order
  (item added, then `mcp_call_arguments.*`), which is the engine's order too, so the
  sequences compare equal after the repair.
- Runs of consecutive `*.done` events are compared as sets (test_engine_parity.py).
- After an approval, Llama Stack lists the server's tools again (an `mcp_list_tools`
  item and its events); the engine reuses the listing already in the conversation, as
  the issue asks. The continuation is compared without Llama Stack's second listing.
"""

from __future__ import annotations

import pytest

from tests.support.gateway_proc import Gateway
from tests.support.openai_shapes import replay_through_sdk

from .conftest import MCP_TOKEN, Chain
from .helpers import checked, done_runs_unordered, kinds

pytestmark = pytest.mark.llama_stack
TENANT = {"X-Tenant": "acme"}
ADD = "Use the add tool with 2 and 3"


@pytest.fixture(scope="module")
def engines(chain: Chain, gateway_factory, tmp_path_factory) -> dict[str, Gateway]:
    token_file = tmp_path_factory.mktemp("engine-mcp-parity") / "calc-token"
    token_file.write_text(MCP_TOKEN + "\n")
    calc = {"name": "calc", "url": chain.mcp.url, "authorization_headers": {"Authorization": str(token_file)},
            "headers": ["X-Tenant"]}
    upstream = {"url": chain.scripted.url, "max_retries": 0, "api": "chat_completions"}
    return {"never": gateway_factory(chain.scripted.url, llama_stack=upstream, mcp_servers=[calc]),
            "always": gateway_factory(chain.scripted.url, llama_stack=upstream,
                                      mcp_servers=[{**calc, "require_approval": "always"}])}


def run(gateway: Gateway, body: dict, without_listings: bool = False,
        ) -> tuple[list[str], list[str], dict, list[dict]]:
    status, frames = gateway.stream(body, headers=TENANT)
    assert status == 200, frames
    events = checked(frames)
    final = events[-1]["response"]
    output = final["output"]
    if without_listings:
        listings = {index for index, item in enumerate(output) if item["type"] == "mcp_list_tools"}
        events = [event for event in events if event.get("output_index") not in listings]
        output = [item for item in output if item["type"] != "mcp_list_tools"]
    return done_runs_unordered(kinds(events)), [item["type"] for item in output], final, events


def test_an_mcp_call_alike(chain: Chain, engines):
    forward_events, forward_items, forward, _ = run(chain.mcp_gateway, {"input": ADD})
    engine_events, engine_items, local, events = run(engines["never"], {"input": ADD})
    assert engine_items == forward_items == ["mcp_list_tools", "mcp_call", "message"]
    assert engine_events == forward_events
    assert local["output_text"] == forward["output_text"] == "Tool said: 5"
    assert [item["output"] for item in local["output"][1:2]] == [item["output"] for item in forward["output"][1:2]]
    assert replay_through_sdk(events).output_text == "Tool said: 5"


def test_an_approval_alike(chain: Chain, engines):
    answers = []
    for gateway in (chain.approval_gateway, engines["always"]):
        first_events, first_items, first, _ = run(gateway, {"input": ADD})
        request = first["output"][-1]
        second_events, second_items, second, _ = run(gateway, {"previous_response_id": first["id"], "input": [
            {"type": "mcp_approval_response", "approval_request_id": request["id"], "approve": True}]},
            without_listings=True)
        answers.append((first_events, first_items, second_events, second_items, second["output_text"]))
    assert answers[0] == answers[1]
    assert answers[1][1] == ["mcp_list_tools", "mcp_approval_request"]
    assert answers[1][3:] == (["mcp_call", "message"], "Tool said: 5")
