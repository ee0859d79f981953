"""file_search's pure parts: the search body, merging and thresholds, what the model
reads, and the file_search_call item and events through the loop (fake executor)."""

from __future__ import annotations

import pytest

from gateway.engine import file_search
from gateway.engine.executor import ToolResult
from gateway.engine.file_search import Hit, hits_of, merge, model_text, query_of, search_body
from gateway.engine.loop import Loop
from tests.engine.fakes import FakeModel, calls_round, emitter, plan, text_round
from tests.engine.test_loop import check_stream, kinds, run


def page(*entries: tuple[str, float, str]) -> dict:
    return {"object": "vector_store.search_results.page", "data": [
        {"file_id": file_id, "filename": f"{file_id}.txt", "score": score, "attributes": {"lang": "en"},
         "content": [{"type": "text", "text": text}]} for file_id, score, text in entries]}


def test_the_query_is_the_calls_argument():
    assert query_of('{"query": "falcon"}') == "falcon"
    assert query_of('{"queries": ["a", "b"]}') == "a b"
    for bad in ("", "{}", '{"query": ""}', '{"query": 3}', "not json", "[1]"):
        with pytest.raises(ValueError):
            query_of(bad)


def test_filters_max_num_results_and_ranking_options_pass_through():
    tool = {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 3,
            "filters": {"type": "eq", "key": "lang", "value": "en"}, "ranking_options": {"score_threshold": 0.5}}
    assert search_body("q", tool) == {"query": "q", "max_num_results": 3, "rewrite_query": False,
                                      "filters": tool["filters"], "ranking_options": tool["ranking_options"]}
    assert search_body("q", {"vector_store_ids": ["vs_1"]}) == {"query": "q", "max_num_results": 10,
                                                                "rewrite_query": False}


def test_a_results_page_becomes_hits_weighted_by_the_multiplier():
    [hit] = hits_of(page(("file-a", 1.25, "alpha")), 2.0)
    assert hit == Hit("file-a", "file-a.txt", "alpha", 1.25, 2.5, {"lang": "en"})
    # Llama Stack's older shape: the ids in the attributes.
    [old] = hits_of({"data": [{"score": 1, "attributes": {"document_id": "file-x", "filename": "x.md"},
                               "content": []}]}, 1.0)
    assert (old.file_id, old.filename, old.text) == ("file-x", "x.md", "")
    for bad in ({}, {"data": None}, {"data": [{"score": "high"}]}, []):
        with pytest.raises(ValueError):
            hits_of(bad, 1.0)


def test_stores_merge_by_weighted_score_and_the_threshold_applies_to_the_raw_score():
    manuals = hits_of(page(("file-m1", 0.9, "m1"), ("file-m2", 0.3, "m2")), 3.0)    # 2.7, 0.9
    faq = hits_of(page(("file-f1", 1.6, "f1"), ("file-f2", 0.95, "f2")), 1.0)       # 1.6, 0.95
    assert [hit.file_id for hit in merge([manuals, faq], None, 10)] == ["file-m1", "file-f1", "file-f2", "file-m2"]
    # 0.5 cuts file-m2 (raw 0.3) although its weighted score (0.9) is above it.
    assert [hit.file_id for hit in merge([manuals, faq], 0.5, 10)] == ["file-m1", "file-f1", "file-f2"]
    assert [hit.file_id for hit in merge([manuals, faq], None, 2)] == ["file-m1", "file-f1"]
    # Ties keep the order of the stores.
    tied = [hits_of(page(("file-1", 1.0, "")), 1.0), hits_of(page(("file-2", 1.0, "")), 1.0)]
    assert [hit.file_id for hit in merge(tied, None, 10)] == ["file-1", "file-2"]


def test_results_keep_only_the_attributes_the_openai_type_allows():
    [hit] = hits_of({"data": [{"file_id": "file-a", "score": 2, "attributes": {"n": 1, "tags": ["x"], "ok": True},
                               "content": [{"type": "text", "text": "t"}]}]}, 0.5)
    assert file_search.results([hit]) == [{"file_id": "file-a", "filename": "file-a", "score": 1.0, "text": "t",
                                           "attributes": {"n": 1, "ok": True}}]


def test_the_model_reads_each_chunk_with_its_citation_marker_first():
    hits = merge([hits_of(page(("file-a", 1.5, "Alpha text.\n"), ("file-b", 0.5, "Beta")), 1.0)], None, 10)
    text = model_text("what is alpha", hits, ["vector store vs_x answered HTTP 500"])
    assert text.splitlines()[:6] == ['file_search found 2 chunks for "what is alpha".',
                                     "Not searched: vector store vs_x answered HTTP 500",
                                     "[1] <|file-a|> file-a.txt (score 1.5)", "Alpha text.",
                                     "[2] <|file-b|> file-b.txt (score 0.5)", "Beta"]
    assert text.endswith(file_search.CITE_INSTRUCTION)
    assert model_text("nothing", []) == 'file_search found 0 chunks for "nothing".'


class FakeSearch:
    """Answers every file_search call with two hits, or fails."""

    def __init__(self, fail: bool = False):
        self.fail = fail

    def can_execute(self, tool):
        return tool.get("type") == "file_search"

    async def execute(self, call):
        if self.fail:
            return ToolResult("file_search failed: vector store vs_1 is unreachable", is_error=True,
                              fields={"queries": ["q"], "error": "dropped: not a field of the item"})
        hits = hits_of(page(("file-a", 1.5, "Alpha"), ("file-b", 1.2, "Beta")), 1.0)
        fields = {"queries": [file_search.query_of(call.arguments)]}
        if call.tool.get("include_results"):
            fields["results"] = file_search.results(hits)
        return ToolResult(model_text("q", hits), fields=fields, citations=file_search.citation_files(hits))


def search_plan(include=None, earlier=()):
    the_plan, the_emitter = plan(), emitter()
    the_plan.tool_choice = "auto"
    file_search.offer([{"type": "file_search", "vector_store_ids": ["vs_1"]}], include, the_plan, the_emitter,
                      earlier)
    return the_plan, the_emitter


async def test_a_search_is_one_item_with_openais_events_and_the_answer_cites_it():
    the_plan, the_emitter = search_plan(include=["file_search_call.results"])
    model = FakeModel(calls_round(("call_1", "file_search", '{"query": "alpha"}')),
                      text_round("Alpha is first <|file-a|>. Beta too <|file-b|><|file-zz|>."))
    events = await run(Loop(model, [FakeSearch()]), the_plan, the_emitter)
    check_stream(events)
    assert kinds(events)[2:7] == ["output_item.added", "file_search_call.in_progress", "file_search_call.searching",
                                  "file_search_call.completed", "output_item.done"]
    assert events[2].data["item"] == {"id": events[2].data["item"]["id"], "type": "file_search_call",
                                      "queries": [], "results": None, "status": "in_progress"}
    assert events[2].data["item"]["id"].startswith("fs_")
    call, message = events[-1].data["response"]["output"]
    assert call["queries"] == ["alpha"] and call["status"] == "completed"
    assert [result["file_id"] for result in call["results"]] == ["file-a", "file-b"]
    assert model.requests[0]["tools"] == [file_search.FUNCTION]
    assert model.requests[1]["messages"][-1]["content"].startswith('file_search found 2 chunks for "q".')
    part = message["content"][0]
    # The text words arrive without spaces (text_round splits on them).
    assert part["text"] == "Alphaisfirst.Betatoo."
    assert part["annotations"] == [
        {"type": "file_citation", "file_id": "file-a", "filename": "file-a.txt", "index": 12},
        {"type": "file_citation", "file_id": "file-b", "filename": "file-b.txt", "index": 20}]
    added = [event.data for event in events if event.type == "response.output_text.annotation.added"]
    assert [(event["annotation_index"], event["annotation"]) for event in added] == list(
        enumerate(part["annotations"]))
    deltas = "".join(event.data["delta"] for event in events if event.type == "response.output_text.delta")
    assert deltas == part["text"]
    # The annotations follow the text they annotate: after its last delta, before
    # `output_text.done` (and `content_part.added` showed none of them).
    names = kinds(events)
    last_delta = len(names) - 1 - names[::-1].index("output_text.delta")
    assert names[last_delta + 1:last_delta + 4] == ["output_text.annotation.added"] * 2 + ["output_text.done"]
    added_part = next(event.data["part"] for event in events if event.type == "response.content_part.added")
    assert added_part["annotations"] == []


async def test_results_are_shown_only_when_included():
    the_plan, the_emitter = search_plan()
    model = FakeModel(calls_round(("call_1", "file_search", '{"query": "alpha"}')), text_round("done"))
    events = await run(Loop(model, [FakeSearch()]), the_plan, the_emitter)
    check_stream(events)
    assert events[-1].data["response"]["output"][0]["results"] is None


async def test_a_failed_search_is_a_failed_item_and_the_model_reads_the_error():
    the_plan, the_emitter = search_plan()
    model = FakeModel(calls_round(("call_1", "file_search", '{"query": "alpha"}')), text_round("sorry"))
    events = await run(Loop(model, [FakeSearch(fail=True)]), the_plan, the_emitter)
    check_stream(events)
    assert "file_search_call.completed" in kinds(events)  # the only end event the openai types have
    call = events[-1].data["response"]["output"][0]
    assert call["status"] == "failed" and "error" not in call
    assert model.requests[1]["messages"][-1]["content"] == \
        "Error: file_search failed: vector store vs_1 is unreachable"


async def test_files_found_by_earlier_turns_may_be_cited():
    earlier = [{"type": "file_search_call", "id": "fs_1", "queries": ["q"], "status": "completed",
                "results": [{"file_id": "file-old", "filename": "old.txt", "score": 1.0, "text": "x"}]}]
    the_plan, the_emitter = search_plan(earlier=earlier)
    events = await run(Loop(FakeModel(text_round("As said <|file-old|>.")), [FakeSearch()]), the_plan, the_emitter)
    check_stream(events)
    part = events[-1].data["response"]["output"][0]["content"][0]
    assert part["text"] == "Assaid." and part["annotations"][0]["filename"] == "old.txt"
