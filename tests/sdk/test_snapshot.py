"""Snapshot and restore: an agent's state as versioned JSON, continued in another
process (a subprocess, through `gateway serve` in both modes), and checked as untrusted
input when restored."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gateway.sdk import Agent, MissingToolError, SnapshotError, tool
from tests.sdk.conftest import mcp_tool, sync_client

CHILD = textwrap.dedent('''
    """Restores an agent from a snapshot file and continues it; prints what happened."""
    import json, sys
    from openai import OpenAI
    from gateway.sdk import Agent, MissingToolError

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    base_url, path, action = sys.argv[1:4]
    snapshot = open(path).read()
    client = OpenAI(base_url=base_url, api_key="test-token", max_retries=0)
    report = {}
    try:
        Agent.restore(snapshot, client, tools=[])
    except MissingToolError as exc:
        report["missing"] = str(exc)
    tools = [add] + [json.loads(t) for t in sys.argv[4:]]
    agent = Agent.restore(snapshot, client, tools=tools)
    if action == "resume":
        report["resumed"] = agent.resume().output_text
    elif action == "approve":
        report["resumed"] = agent.resume({r.id: True for r in agent.pending_approvals}).output_text
    report["next"] = agent.run("Thanks").output_text
    print(json.dumps(report))
''')


def continue_elsewhere(tmp_path: Path, gw, snapshot: dict, action: str, *tools: dict) -> dict:
    script, state = tmp_path / "child.py", tmp_path / "snapshot.json"
    script.write_text(CHILD)
    state.write_text(json.dumps(snapshot))  # JSON on disk: nothing else crosses over
    done = subprocess.run([sys.executable, str(script), gw.base_url, str(state), action,
                           *(json.dumps(t) for t in tools)],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_pending_calls_continue_in_another_process(gw, tmp_path):
    agent = Agent(sync_client(gw), tools=[add], max_turns=1, instructions="Be brief.")
    stopped = agent.run("Use the add tool with 2 and 3")
    assert stopped.status == "max_turns"
    snapshot = agent.snapshot()
    assert snapshot["format"] == "gateway.sdk.agent" and snapshot["version"] == 1
    assert [c["name"] for c in snapshot["pending_calls"]] == ["add"]
    report = continue_elsewhere(tmp_path, gw, snapshot, "resume")
    assert "['add']" in report["missing"]
    assert report["resumed"] == "Tool said: 5"
    assert report["next"].startswith("Scripted reply (turn 2, 5 messages)")


def test_pending_approval_continues_in_another_process(gw, sdk_mcp, tmp_path):
    mcp = mcp_tool(sdk_mcp.url)
    agent = Agent(sync_client(gw), tools=[mcp])
    assert agent.run("Use the add tool with 2 and 3").status == "pending_approval"
    report = continue_elsewhere(tmp_path, gw, agent.snapshot(), "approve", mcp)
    assert "missing" not in report
    assert report["resumed"] == "Tool said: 5"
    assert report["next"].startswith("Scripted reply (turn 2,")


def test_store_false_history_travels_in_the_snapshot(gw, tmp_path):
    agent = Agent(sync_client(gw), tools=[add], store=False)
    assert agent.run("Use the add tool with 2 and 3").output_text == "Tool said: 5"
    snapshot = json.loads(json.dumps(agent.snapshot()))
    assert snapshot["previous_response_id"] is None and len(snapshot["history"]) == 4
    report = continue_elsewhere(tmp_path, gw, snapshot, "none")
    assert report["next"] == "Scripted reply (turn 2, 5 messages): Thanks"


class _Client:
    """Enough of a client for agents that never call it."""

    responses = object()


def _good() -> dict:
    return Agent(_Client(), model="m", tools=[add]).snapshot()


@pytest.mark.parametrize("bad, message", [
    (b"\x80\x04K\x01.", "not JSON"),  # a pickle is never unpickled
    (pickle.dumps({"format": "gateway.sdk.agent"}), "not JSON"),
    ("[1, 2]", "a JSON object"),
    ({"format": "something"}, "not an agent snapshot"),
    ({**_good(), "version": 2}, "unsupported snapshot version 2"),
    ({**_good(), "extra": 1}, "extra: Extra inputs are not permitted"),
    ({**_good(), "max_turns": "10"}, "max_turns: Input should be a valid integer"),
    ({**_good(), "max_turns": 0}, "max_turns: Input should be greater than or equal to 1"),
    ({**_good(), "history": [{"role": "user"}]}, "history.0"),
    ({**_good(), "history": [{"type": "message", "x": {1, 2}}]}, "history.0"),
    ({**_good(), "previous_response_id": "resp_1\nX-Injected: 1"}, "previous_response_id"),
    ({**_good(), "pending_calls": [{"type": "function_call", "call_id": "c", "name": "../add",
                                    "arguments": "{}"}]}, "pending_calls.0.name"),
    ({**_good(), "chain": "telepathy"}, "chain"),
])
def test_a_bad_snapshot_is_refused(bad, message):
    with pytest.raises(SnapshotError, match=message.replace("(", r"\(")) as caught:
        Agent.restore(bad, _Client(), tools=[add])
    assert isinstance(caught.value, ValueError)


def test_a_missing_tool_for_pending_calls_is_named():
    snapshot = {**_good(), "pending_calls": [{"type": "function_call", "call_id": "call_1",
                                              "name": "weather", "arguments": "{}"}]}
    with pytest.raises(MissingToolError, match=r"\['weather'\]"):
        Agent.restore(snapshot, _Client(), tools=[add])
    restored = Agent.restore(json.dumps(snapshot), _Client(), tools=[add, tool(_weather, name="weather")])
    assert restored.snapshot() == {**snapshot, "tools": ["add", "weather"]}


def _weather(city: str) -> str:
    return "sunny"
