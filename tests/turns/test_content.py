"""The turn store's content of a turn (`turns/content.py`): what is kept, and read back."""

from __future__ import annotations

import orjson

from gateway.turns.content import read_content, turn_content

MESSAGE = {"type": "message", "role": "assistant",
           "content": [{"type": "output_text", "text": "Hello "}, {"type": "output_text", "text": "there"}]}
TOOL = {"type": "mcp_call", "id": "mcp_1", "name": "lookup", "arguments": "{}", "output": "42",
        "server_label": "s"}


def test_question_answer_and_tool_items_are_kept():
    stored = turn_content("say hi", {"output": [{"type": "reasoning", "id": "rs_1"}, TOOL, MESSAGE]})
    assert orjson.loads(stored) == {"q": "say hi", "a": "Hello there", "i": [TOOL]}
    assert read_content(stored) == ("say hi", "Hello there", [TOOL])


def test_a_refusal_stands_for_a_missing_answer_and_no_tools_adds_no_key():
    refused = {"type": "message", "content": [{"type": "refusal", "refusal": "I cannot"}]}
    assert orjson.loads(turn_content("q", {"output": [refused]})) == {"q": "q", "a": "I cannot"}


def test_odd_output_and_old_rows_read_as_empty():
    assert read_content(turn_content("q", {"output": None})) == ("q", "", [])
    assert read_content(turn_content("q", {"output": ["junk", 3]})) == ("q", "", [])
    assert read_content(None) == ("", "", [])
    assert read_content("not json") == ("", "", [])
    assert read_content('["a list"]') == ("", "", [])


def test_the_form_is_kept_only_when_not_the_default():
    # The content's last key (migration 11 fills the row's column from it).
    from gateway.turns.content import turn_content
    assert turn_content("q", {"output": []}, "object").endswith(',"f":1}')
    assert turn_content("q", {"output": []}, "bare").endswith(',"f":2}')
    assert '"f"' not in turn_content("q", {"output": []})


def test_the_form_column_codes():
    from gateway.turns.content import form_code, form_name
    assert [form_code(form) for form in ("string", "object", "bare")] == [0, 1, 2]
    assert [form_name(code) for code in (0, 1, 2)] == ["string", "object", "bare"]
    assert form_name(None) is None   # a turn recorded before the turn store