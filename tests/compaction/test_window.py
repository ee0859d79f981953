"""`compaction/window.py`: the compact request, the summary turn and the answer."""

from __future__ import annotations

import pytest

from gateway.compaction.window import compacted, parse_compact_request, summary_turn, usage, user_messages
from gateway.schema.compaction_api import CompactedWindow
from gateway.schema.errors import ApiError


def test_the_summary_turn_is_the_window_then_the_prompt_unstored():
    request = parse_compact_request({"model": "m", "input": "hello", "previous_response_id": "resp_1",
                                     "instructions": "be brief", "prompt_cache_key": "k"})
    raw = summary_turn(request, "Summarize.")
    assert raw == {"model": "m", "previous_response_id": "resp_1", "store": False, "stream": False,
                   "generate_topic_summary": False, "tool_choice": "none",
                   "input": [{"type": "message", "role": "user", "content": "hello"},
                             {"type": "message", "role": "user", "content": "Summarize."}]}


def test_validation():
    with pytest.raises(ApiError) as refused:
        parse_compact_request({"input": "x"})
    assert refused.value.status == 422 and refused.value.detail[0]["loc"] == ["body", "model"]
    with pytest.raises(ApiError) as refused:
        parse_compact_request({"model": "m", "input": "x", "stream": True})
    assert refused.value.status == 422 and refused.value.detail[0]["type"] == "extra_forbidden"
    with pytest.raises(ApiError) as refused:
        parse_compact_request({"model": "m", "input": []})
    assert refused.value.status == 400
    # The openai package's extra fields are accepted.
    parse_compact_request({"model": "m", "input": "x", "service_tier": "auto", "prompt_cache_retention": "24h"})


def test_the_answer_keeps_user_messages_only_then_the_item():
    request = parse_compact_request({"model": "m", "input": [
        {"role": "user", "content": "one"}, {"type": "message", "role": "assistant", "content": "reply"},
        {"type": "message", "role": "user", "id": "msg_keep", "content": [{"type": "input_text", "text": "two"}]},
        {"type": "compaction", "encrypted_content": "older"}, {"type": "function_call_output", "call_id": "c",
                                                              "output": "o"}]})
    answer = compacted(request, "gwc1.k.sealed", {"input_tokens": 5, "output_tokens": 3})
    CompactedWindow.model_validate(answer)
    assert [item["type"] for item in answer["output"]] == ["message", "message", "compaction"]
    assert answer["output"][0]["content"] == [{"type": "input_text", "text": "one"}]
    assert answer["output"][1]["id"] == "msg_keep"
    assert answer["output"][-1]["encrypted_content"] == "gwc1.k.sealed"
    assert answer["usage"]["total_tokens"] == 8


def test_usage_shape_from_nothing():
    assert usage(None) == {"input_tokens": 0, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                           "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0}
    assert user_messages(None) == []


def test_the_chains_turns_come_first():
    request = parse_compact_request({"model": "m", "previous_response_id": "resp_2", "input": "three"})
    answer = compacted(request, "gwc1.k.sealed", None, ["one", "two"])
    texts = [item["content"][0]["text"] for item in answer["output"][:-1]]
    assert texts == ["one", "two", "three"] and answer["output"][-1]["type"] == "compaction"
