"""The scripted model: decision rules, arguments, usage, delta fitting."""

from __future__ import annotations

import json

from gateway.devserver.model import (ToolSpec, chunk16, decide, fit_pieces, make_arguments,
                                     split_words)

WEATHER = ToolSpec("get_weather", {"type": "object", "properties": {"location": {"type": "string"}},
                                   "required": ["location"]})
ADD = ToolSpec("add", {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"], "type": "object"})
ECHO = ToolSpec("echo", {"properties": {"text": {"type": "string"}}, "required": ["text"],
                         "type": "object"})


def user(text):
    return {"role": "user", "content": text}


def test_scripted_reply_counts_turns_and_non_system_messages():
    reply = decide([{"role": "system", "content": "Be terse."}, user("Hello there"),
                    {"role": "assistant", "content": "x"}, user("Second turn")])
    assert reply.text == "Scripted reply (turn 2, 3 messages): Second turn"
    assert reply.tool_name is None


def test_usage_is_a_word_count():
    reply = decide([user("Hello there")])
    assert reply.text == "Scripted reply (turn 1, 1 messages): Hello there"
    assert (reply.prompt_tokens, reply.completion_tokens) == (2, 8)


def test_list_content_is_read_as_text():
    reply = decide([user([{"type": "text", "text": "Hi as a list"}])])
    assert reply.text.endswith(": Hi as a list")
    assert reply.prompt_tokens == 4


def test_tool_call_when_trigger_word_and_tools():
    reply = decide([user("What is the weather in Paris? Use the tool.")], [WEATHER])
    assert reply.text is None
    assert reply.tool_name == "get_weather"
    assert reply.arguments == '{"location": "Paris"}'  # same bytes as the recorded upstream
    assert (reply.prompt_tokens, reply.completion_tokens) == (9, 2)


def test_no_tool_call_without_trigger_word():
    reply = decide([user("Hello there")], [WEATHER])
    assert reply.text.startswith("Scripted reply")


def test_tool_named_in_text_wins_over_first_tool():
    reply = decide([user("Use the add tool to add two numbers")], [ECHO, ADD])
    assert reply.tool_name == "add"
    assert reply.arguments == '{"a": 2, "b": 3}'
    reply = decide([user("please call something")], [ECHO, ADD])
    assert reply.tool_name == "echo"
    assert json.loads(reply.arguments) == {"text": "please call something"}


def test_numbers_in_text_become_arguments():
    assert make_arguments(ADD.parameters, "add 7 and 35") == {"a": 7, "b": 35}


def test_arguments_follow_schema_types():
    schema = {"type": "object", "properties": {
        "query": {"type": "string"}, "n": {"type": "number"}, "flag": {"type": "boolean"},
        "unit": {"type": "string", "enum": ["c", "f"]}, "tags": {"type": "array",
                                                               "items": {"type": "string"}}}}
    args = make_arguments(schema, "search docs")
    assert args == {"query": "search docs", "n": 2, "flag": True, "unit": "c",
                    "tags": ["search docs"]}


def test_tool_result_is_echoed():
    reply = decide([user("use it"), {"role": "assistant", "content": "", "tool_calls": []},
                    {"role": "tool", "tool_call_id": "c", "content": '{"temp_c": 21}'}], [WEATHER])
    assert reply.text == 'Tool said: {"temp_c": 21}'
    assert (reply.prompt_tokens, reply.completion_tokens) == (4, 4)


def test_tool_result_parts_are_joined_and_cut():
    reply = decide([{"role": "tool", "content": [{"type": "text", "text": "x" * 300}]}])
    assert reply.text == "Tool said: " + "x" * 200


def test_tool_choice_none_and_forced():
    assert decide([user("use the tool")], [WEATHER], tool_choice="none").text is not None
    assert decide([user("hello")], [WEATHER], tool_choice="required").tool_name == "get_weather"
    forced = decide([user("hello")], [WEATHER, ADD],
                    tool_choice={"type": "function", "name": "add"})
    assert forced.tool_name == "add"


def test_split_words_keeps_whitespace():
    text = "Tool said: found 1 chunks:\nBEGIN of\n [1] x"
    pieces = split_words(text)
    assert "".join(pieces) == text
    assert pieces[:3] == ["Tool ", "said: ", "found "]
    assert split_words("  lead") == ["  lead"]


def test_fit_pieces_pads_and_merges():
    padded = fit_pieces("one two", 5)
    assert len(padded) == 5 and padded[:2] == ["one ", "two "]
    merged = fit_pieces("a b c d e", 2)
    assert merged == ["a b c ", "d e"]
    assert fit_pieces("a b", 0) == []


def test_deltas_knob_changes_text_and_usage():
    reply = decide([user("hi")], deltas=40)
    assert len(reply.pieces) == 40
    assert reply.text == "".join(reply.pieces)
    assert reply.completion_tokens == 40


def test_chunk16():
    assert chunk16('{"location": "Paris"}') == ['{"location": "Pa', 'ris"}']
    assert chunk16("") == [""]


def test_scripted_recap_repeats_every_earlier_user_text():
    reply = decide([{"role": "system", "content": "Be terse."}, user("I like teal"),
                    {"role": "assistant", "content": "Noted."}, user([{"type": "input_text", "text": "I am Al"}]),
                    user("scripted-recap please")])
    assert reply.text == "Recap: I like teal | I am Al"
