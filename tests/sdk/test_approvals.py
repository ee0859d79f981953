"""MCP approvals through `gateway serve` in both modes: a callback (sync or async) says
yes or no; without one the run stops at the request and `resume` answers it."""

from __future__ import annotations

import pytest

from gateway.sdk import Agent, AgentStateError, ApprovalRequest
from tests.sdk.conftest import async_client, mcp_tool, sync_client

ASK = "Use the add tool with 2 and 3"


def kinds(result) -> list[str]:
    return [item["type"] for item in result.items]


def test_callback_approves(gw, sdk_mcp):
    asked: list[ApprovalRequest] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    result = Agent(sync_client(gw), tools=[mcp_tool(sdk_mcp.url)], on_approval=approve).run(ASK)
    assert [(r.server_label, r.name) for r in asked] == [("peer", "add")]
    assert result.status == "completed" and result.output_text == "Tool said: 5"
    assert "mcp_approval_response" in kinds(result) and "mcp_call" in kinds(result)
    [response] = [i for i in result.items if i["type"] == "mcp_approval_response"]
    assert response == {"type": "mcp_approval_response", "approval_request_id": asked[0].id, "approve": True}


async def test_async_callback_denies(gw, sdk_mcp):
    async def deny(request: ApprovalRequest) -> bool:
        return False

    agent = Agent(async_client(gw), tools=[mcp_tool(sdk_mcp.url)], on_approval=deny)
    events = [event async for event in agent.astream(ASK)]
    [approval] = [e for e in events if e.type == "approval_request"]
    assert approval.approved is False and approval.request.name == "add"
    result = events[-1].result
    assert result.status == "completed" and result.pending_approvals == []
    # The denial went back to the server and the tool never ran (the engine tells the
    # model it was denied; Llama Stack ends the turn without a message).
    assert {"type": "mcp_approval_response", "approval_request_id": approval.request.id,
            "approve": False} in result.items
    assert "mcp_call" not in kinds(result)
    assert result.output_text in ("", "Tool said: The user denied this call of the tool.")


def test_no_callback_stops_then_resume(gw, sdk_mcp):
    agent = Agent(sync_client(gw), tools=[mcp_tool(sdk_mcp.url)])
    stopped = agent.run(ASK)
    assert stopped.status == "pending_approval" and stopped.output_text == ""
    [request] = stopped.pending_approvals
    assert (request.name, request.server_label) == ("add", "peer")
    assert agent.pending_approvals == [request]
    with pytest.raises(AgentStateError, match="resume"):
        agent.run("something else")
    with pytest.raises(AgentStateError, match="no pending approval request"):
        agent.resume({"approval_made_up": True})
    done = agent.resume({request.id: True})
    assert done.status == "completed" and done.output_text == "Tool said: 5"
    assert agent.pending_approvals == []
    with pytest.raises(AgentStateError, match="nothing to resume"):
        agent.resume()


def test_resume_without_verdicts_stops_again(gw, sdk_mcp):
    agent = Agent(sync_client(gw), tools=[mcp_tool(sdk_mcp.url)])
    request = agent.run(ASK).pending_approvals[0]
    again = agent.resume()
    assert again.status == "pending_approval" and again.pending_approvals == [request]
    assert again.usage.requests == 0


async def test_no_callback_stops_then_aresume(gw, sdk_mcp):
    agent = Agent(async_client(gw), tools=[mcp_tool(sdk_mcp.url)])
    stopped = await agent.arun(ASK)
    assert stopped.status == "pending_approval"
    done = await agent.aresume(approvals={stopped.pending_approvals[0].id: True})
    assert done.output_text == "Tool said: 5" and agent.pending_approvals == []
