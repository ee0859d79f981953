"""The web_search executor's pure parts: the endpoint's answer checked, what the model
reads, and the call's item through the emitter (engine/web_search.py)."""

import pytest

from gateway.engine.citations import Citations
from gateway.engine.emitter import Emitter
from gateway.engine.response import new_response
from gateway.engine.plan import Plan
from gateway.engine.web_search import _for_the_model, _results, offer_web_search
from tests.support.openai_shapes import validate_event


def test_results_are_checked_and_cut():
    assert _results({"results": [{"url": "https://a/", "title": None, "content": "x" * 5000, "extra": 1}]}) == [
        {"url": "https://a/", "title": "", "content": "x" * 4000}]
    for answer in ({"items": []}, [], {"results": [{"title": "no url"}]}, {"results": ["https://a/"]}):
        with pytest.raises(ValueError):
            _results(answer)


def test_what_the_model_reads():
    text = _for_the_model("llamas", [(3, {"url": "https://a/", "title": "A", "content": "About A."}),
                                     (4, {"url": "https://b/", "title": "", "content": ""})])
    assert text.splitlines() == ["Web search results for 'llamas':", "[3] A", "URL: https://a/", "About A.", "",
                                 "[4] https://b/", "URL: https://b/", "", "",
                                 "Cite a result by its marker, e.g. [1], right after the statement it supports."]
    assert _for_the_model("llamas", []) == "The web search for 'llamas' found nothing."


def test_allowed_tools_naming_the_search():
    plan = Plan(chat={}, messages=[], tools={}, allowed=frozenset({"f"}))
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "function", "name": "f"},
                                                                 {"type": "web_search"}]}
    offer_web_search({"type": "web_search"}, {"tool_choice": choice}, plan, Emitter(new_response("r", "m", {}, None, [])))
    assert plan.allowed == {"f", "web_search"} and plan.tool_choice is None
    plan = Plan(chat={}, messages=[], tools={}, allowed=frozenset({"f"}))
    offer_web_search({"type": "web_search"}, {"tool_choice": {**choice, "tools": choice["tools"][:1]}}, plan,
                     Emitter(new_response("r", "m", {}, None, [])))
    assert plan.allowed == {"f"}  # not among the allowed tools: the loop refuses its calls


def test_a_search_call_item_through_the_emitter():
    emitter = Emitter(new_response("resp_1", "m", {}, None, []))
    plan = Plan(chat={}, messages=[], tools={"web_search": {"type": "function", "name": "web_search"}})
    offer_web_search({"type": "web_search"}, {"include": ["web_search_call.action.sources"],
                                              "tool_choice": {"type": "web_search_preview"}}, plan, emitter)
    # A function tool already has the name: the model sees the search under another.
    assert list(plan.tools) == ["web_search", "web__web_search"]
    assert plan.tools["web__web_search"]["include_sources"] is True
    assert plan.tool_choice == {"type": "function", "function": {"name": "web__web_search"}}  # forced, renamed
    assert isinstance(emitter.sources, Citations)
    emitter.start()
    emitter.call_started(0, "call_1", "web__web_search")
    emitter.call_arguments(0, '{"query": ')
    emitter.call_arguments(0, '"llamas"}')
    [call] = emitter.close_items()
    assert call["arguments"] == '{"query": "llamas"}'
    emitter.call_done("call_1", {"action": {"type": "search", "query": "llamas"}}, failed=False)
    events = [event.data for event in emitter.take()]
    assert [event["type"] for event in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.web_search_call.in_progress", "response.web_search_call.searching",
        "response.web_search_call.completed", "response.output_item.done"]
    for event in events:
        validate_event(event)
    assert events[-1]["item"]["status"] == "completed" and "arguments" not in events[-1]["item"]
