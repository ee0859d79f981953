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


def _nested(levels: int, inner: object = None) -> list:
    value: object = [] if inner is None else inner
    for _ in range(levels - 1 if inner is None else levels):
        value = [value]
    return value  # type: ignore[return-value]


def _text_with(value_text: str) -> str:
    """A good snapshot's JSON text with one history item holding `value_text`."""
    return json.dumps({**_good(), "history": [{"type": "message", "x": "HERE"}]}).replace('"HERE"', value_text)


def _itself() -> dict:
    item: dict = {"type": "message"}
    item["again"] = item
    return item


def _shared(levels: int) -> list:
    """Lists nested `levels` deep, each holding the next twice: 2**levels values as walked."""
    value: list = []
    for _ in range(levels):
        value = [value, value]
    return value


# Level 1 is the snapshot, 2 its history, 3 the item: an item's value may nest 197 more.
@pytest.mark.parametrize("bad, message", [
    (_text_with("[" * 198 + "]" * 198), "deeper than 200 levels"),
    (_text_with("[" * 1000 + "]" * 1000), "deeper than 200 levels"),
    (_text_with("[" * 100_000 + "]" * 100_000), "deeper than 200 levels"),
    (_text_with("[" * 100_000).encode(), "deeper than 200 levels"),            # and not even JSON
    (_text_with("{\"a\":" * 5000 + "1" + "}" * 5000).encode("utf-16"), "deeper than 200 levels"),
    ({**_good(), "history": [{"type": "message", "x": _nested(198)}]}, "deeper than 200 levels"),
    ({**_good(), "history": [{"type": "message", "x": _nested(100_000)}]}, "deeper than 200 levels"),
    ({**_good(), "history": [_itself()]}, "contains itself"),
    ({**_good(), "history": [{"type": "message", "x": _shared(100)}]}, "more than 33554432 values"),
    ({**_good(), "history": [{"type": "message", "x": float("nan")}]}, "holds nan"),
    (_text_with("NaN"), "holds NaN"),
    (_text_with("1e999"), "1e999, which is not a finite number"),
    (_text_with("9" * 5000), "not JSON: Exceeds the limit"),
    (b"\xff\xfe\x00", "not JSON"),
    (json.dumps("x" * 1_000_000), "a JSON object"),
    ("[" + "0," * 1_000_000 + "0]", "a JSON object"),
    ({**_good(), "history": [{"type": "message"}] * (100_001)}, "history: List should have at most 100000 items"),
    ({**_good(), "history": [{"type": "message", "k" * 100_000: {1}}]}, "history.0." + "k" * 64 + ": input"),
    ("x" * (64 * 1024 * 1024 + 1), "too large"),
])
def test_a_hostile_snapshot_is_refused_with_the_sdk_error(bad, message):
    with pytest.raises(SnapshotError, match=message) as caught:
        Agent.restore(bad, _Client(), tools=[add])
    assert len(str(caught.value)) < 2000


def test_nesting_up_to_the_limit_restores():
    for snapshot in (_text_with("[" * 197 + "]" * 197), {**_good(), "history": [{"type": "message",
                                                                                   "x": _nested(197)}]}):
        restored = Agent.restore(snapshot, _Client(), tools=[add])
        assert restored.history[0]["x"] == _nested(197)
    # An item shared between lists (an agent's own state may share them) is walked once.
    item = {"type": "message", "x": _nested(150)}
    assert Agent.restore({**_good(), "history": [item] * 1000}, _Client(), tools=[add]).history[999] == item


def test_json_running_out_of_stack_is_the_sdk_error(monkeypatch):
    # Should the text's own bound let a nesting through that `json` cannot decode on the
    # caller's stack, Python's RecursionError still becomes the SDK's error.
    monkeypatch.setattr("gateway.sdk.snapshot.MAX_DEPTH", 10**9)
    with pytest.raises(SnapshotError, match="deeper than"):
        Agent.restore(_text_with("[" * 100_000 + "]" * 100_000), _Client(), tools=[add])


def test_a_missing_tool_for_pending_calls_is_named():
    snapshot = {**_good(), "pending_calls": [{"type": "function_call", "call_id": "call_1",
                                              "name": "weather", "arguments": "{}"}]}
    with pytest.raises(MissingToolError, match=r"\['weather'\]"):
        Agent.restore(snapshot, _Client(), tools=[add])
    restored = Agent.restore(json.dumps(snapshot), _Client(), tools=[add, tool(_weather, name="weather")])
    assert restored.snapshot() == {**snapshot, "tools": ["add", "weather"]}


def _weather(city: str) -> str:
    return "sunny"
