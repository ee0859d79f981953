"""The loop's requests, sans I/O (gateway/sdk/loop.py): what each request carries for
each way of chaining, and that state changes only when a model call succeeded."""

from __future__ import annotations

import pytest

from gateway.sdk import ResponseFailedError
from gateway.sdk.loop import AgentConfig, AgentState, CallModel, run_loop
from gateway.sdk.tools import build_toolset


def config(**changes) -> AgentConfig:
    base = dict(model=None, instructions="Be brief.", max_turns=5, store=True,
                chain="previous_response_id", merge_server_tools=False, ask_approvals=False)
    return AgentConfig(**{**base, **changes})


def reply(rid: str, text: str = "hi", **extra) -> dict:
    return {"id": rid, "status": "completed", "conversation": "conv_1",
            "output": [{"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text}]}],
            "usage": {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}, **extra}


def first_request(cfg: AgentConfig, state: AgentState) -> CallModel:
    loop = run_loop(cfg, state, build_toolset([]), [{"type": "message", "role": "user", "content": "x"}], None)
    return next(loop)


def test_chained_by_previous_response_id_by_default():
    state = AgentState(previous_response_id="resp_1", conversation="conv_1")
    call = first_request(config(), state)
    assert call.body["previous_response_id"] == "resp_1" and "conversation" not in call.body
    assert call.body["instructions"] == "Be brief." and "model" not in call.body
    assert call.headers == {}


def test_chained_by_conversation():
    call = first_request(config(chain="conversation", model="m"), AgentState(previous_response_id="r", conversation="conv_1"))
    assert call.body["conversation"] == "conv_1" and "previous_response_id" not in call.body
    assert call.body["model"] == "m"


def test_store_false_sends_history_and_no_ids():
    history = [{"type": "message", "role": "user", "content": "before"}]
    call = first_request(config(store=False), AgentState(history=list(history), conversation="conv_1"))
    assert call.body["store"] is False and "previous_response_id" not in call.body
    assert "conversation" not in call.body
    assert call.body["input"] == [*history, {"type": "message", "role": "user", "content": "x"}]


def test_merge_server_tools_is_a_header():
    assert first_request(config(merge_server_tools=True), AgentState()).headers == {"X-LCS-Merge-Server-Tools": "true"}


def test_a_failed_response_changes_nothing():
    state = AgentState(previous_response_id="resp_1")
    loop = run_loop(config(), state, build_toolset([]), [{"type": "message", "role": "user", "content": "x"}], None)
    next(loop)
    with pytest.raises(ResponseFailedError, match="boom"):
        loop.send({"id": "resp_2", "status": "failed", "error": {"message": "boom"}, "output": []})
    assert state.previous_response_id == "resp_1" and state.history == []


def test_a_final_answer_commits_and_sums_usage():
    state = AgentState()
    loop = run_loop(config(), state, build_toolset([]), [{"type": "message", "role": "user", "content": "x"}], None)
    next(loop)
    with pytest.raises(StopIteration) as stop:
        loop.send(reply("resp_9", "done"))
    result = stop.value.value
    assert (result.output_text, result.response_id, result.conversation) == ("done", "resp_9", "conv_1")
    assert (result.usage.input_tokens, result.usage.total_tokens, result.usage.requests) == (1, 3, 1)
    assert state.previous_response_id == "resp_9" and len(state.history) == 2


def test_the_callers_mistakes_are_value_errors():
    from gateway import sdk

    for cls in (sdk.ToolDefinitionError, sdk.SnapshotError, sdk.MissingToolError, sdk.AgentStateError):
        assert issubclass(cls, sdk.AgentError) and issubclass(cls, ValueError)
    assert issubclass(sdk.ResponseFailedError, RuntimeError)
    assert not issubclass(sdk.ResponseFailedError, ValueError)
