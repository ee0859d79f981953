"""The local engine's file_search through `gateway serve` (llama_stack.api:
chat_completions) in front of the scripted Chat Completions upstream and a loopback
vector store search server (tests/support/vector_store.py), which `byok_rag` entries
reach by their `search_url`.

The scripted model calls file_search for a prompt with "search" in it, then answers
`Tool said: <the first 200 characters it read>`, which carries the first chunk's
citation marker: the answer cites it, as a real model asked to would.
"""

from __future__ import annotations

import pytest

from gateway.engine import file_search
from tests.support.flows import checked, kinds
from tests.support.openai_shapes import replay_through_sdk, validate_response
from tests.support.raw_client import open_stream, read_until, reset, wait_until
from tests.support.vector_store import clear_searches, recorded_searches, start_vector_store

CHAT = "/v1/chat/completions"
SEARCH_KEY = "vector-s3cret-key"
PROMPT = "search the manuals for the Falcon launch code"
INCLUDE = ["file_search_call.results"]


def tool(*stores: str, **options):
    return {"type": "file_search", "vector_store_ids": list(stores), **options}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    server = start_vector_store(tmp_path_factory.mktemp("vector-store"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, stores):
    near = {"search_url": stores.url}
    return gateway_factory(
        chat_upstream.url, llama_stack={"url": chat_upstream.url, "max_retries": 0, "api": "chat_completions"},
        byok_rag=[{"rag_id": "manuals", "vector_db_id": "vs_manuals", "score_multiplier": 3.0,
                   "search_api_key": SEARCH_KEY, **near},
                  {"rag_id": "faq", "vector_db_id": "vs_faq", **near},
                  {"rag_id": "slow", "vector_db_id": "vs_slow", "search_timeout": 1, **near},
                  {"rag_id": "patient", "vector_db_id": "vs_slow_patient", "search_timeout": 30, **near},
                  {"rag_id": "broken", "vector_db_id": "vs_broken", **near}])


def stream(engine, body):
    status, frames = engine.stream(body)
    assert status == 200, frames
    return checked(frames)  # numbered from 0, every event an `openai` type


def test_a_search_streams_its_item_then_a_cited_answer(engine, stores):
    clear_searches(stores)
    events = stream(engine, {"input": PROMPT, "tools": [tool("manuals", "faq")], "include": INCLUDE})
    names = kinds(events)
    deltas = names.count("output_text.delta")
    assert names == ["created", "in_progress",
                     "output_item.added", "file_search_call.in_progress", "file_search_call.searching",
                     "file_search_call.completed", "output_item.done",
                     "output_item.added", "content_part.added",
                     *names[9:len(names) - 4],
                     "output_text.done", "content_part.done", "output_item.done", "completed"]
    annotations = names.count("output_text.annotation.added")
    # The annotations follow the text they annotate: every delta, then the annotations.
    assert names[9:9 + deltas + annotations] == ["output_text.delta"] * deltas + [
        "output_text.annotation.added"] * annotations
    call, message = events[-1]["response"]["output"]
    assert call["type"] == "file_search_call" and call["status"] == "completed"
    assert call["queries"] == [PROMPT]
    # Both stores searched, merged by score × score_multiplier (manuals: 3.0; raw scores
    # 2.5, 0.5 and 2.0, 0.5).
    assert [(r["file_id"], r["filename"], r["score"]) for r in call["results"]] == [
        ("file-m1", "manual.txt", 7.5), ("file-f1", "faq.md", 2.0), ("file-m2", "handbuch.txt", 1.5),
        ("file-f2", "mascot.md", 0.5)]
    assert call["results"][0]["text"] == "The secret launch code for project Falcon is 7-alpha-9."
    assert call["results"][0]["attributes"] == {"lang": "en", "year": 2025}
    # The answer cites the first chunk; the client sees no marker.
    part = message["content"][0]
    assert part["text"].startswith('Tool said: file_search found 4 chunks for "search the manuals for the Falcon '
                                   'launch code".\n[1] manual.txt (score 7.5)\nThe secret launch code')
    assert "<|" not in part["text"]
    # The 200 characters the model echoes hold the first two markers.
    assert part["annotations"] == [
        {"type": "file_citation", "file_id": "file-m1", "filename": "manual.txt", "index": part["text"].index("[1]") + 3},
        {"type": "file_citation", "file_id": "file-f1", "filename": "faq.md", "index": part["text"].index("[2]") + 3}]
    streamed = "".join(event["delta"] for event in events if event["type"] == "response.output_text.delta")
    assert streamed == part["text"]
    assert replay_through_sdk(events).output_text == part["text"]
    searched = {record["store"]: record for record in recorded_searches(stores)}
    assert sorted(searched) == ["vs_faq", "vs_manuals"]
    assert searched["vs_faq"]["body"] == {"query": PROMPT, "max_num_results": 10, "rewrite_query": False}
    # Each store's own key, only to its store (the session checks no client ever saw it).
    assert searched["vs_manuals"]["headers"]["authorization"] == f"Bearer {SEARCH_KEY}"
    assert "authorization" not in searched["vs_faq"]["headers"]


def test_the_model_reads_the_chunks_with_their_markers(engine, chat_upstream):
    chat_upstream.clear()
    engine.post("/v1/responses", {"input": PROMPT, "tools": [tool("faq")]}).ok()
    first, second = chat_upstream.requests(CHAT)
    assert first["body"]["tools"] == [{"type": "function", "function": {
        "name": "file_search", "description": "Search files for relevant information",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "The search query"}},
                       "required": ["query"]}}}]
    read = second["body"]["messages"][-1]
    assert read["role"] == "tool"
    assert read["content"].startswith(f'file_search found 2 chunks for "{PROMPT}".\n'
                                      "[1] <|file-f1|> faq.md (score 2)\n"
                                      "Falcon ships in March; the launch code stays secret.\n"
                                      "[2] <|file-f2|> mascot.md (score 0.5)\n")
    assert read["content"].endswith(file_search.CITE_INSTRUCTION)


def test_results_only_when_included_and_a_json_body_like_the_stream(engine):
    body = engine.post("/v1/responses", {"input": PROMPT, "tools": [tool("manuals")]}).ok()
    validate_response(body)
    call, message = body["output"]
    assert call["type"] == "file_search_call" and call["results"] is None and call["queries"] == [PROMPT]
    assert message["content"][0]["annotations"][0]["file_id"] == "file-m1"


def test_filters_and_max_num_results_pass_through_and_the_threshold_cuts_raw_scores(engine, stores):
    clear_searches(stores)
    english = {"type": "eq", "key": "lang", "value": "en"}
    body = engine.post("/v1/responses", {"input": PROMPT, "include": INCLUDE, "tools": [
        tool("manuals", "faq", filters=english, max_num_results=2)]}).ok()
    assert [r["file_id"] for r in body["output"][0]["results"]] == ["file-m1", "file-f1"]
    assert {record["body"]["max_num_results"] for record in recorded_searches(stores)} == {2}
    assert {str(record["body"]["filters"]) for record in recorded_searches(stores)} == {str(english)}
    # Raw scores: file-m1 2.5, file-f1 2.0, file-m2 0.5, file-f2 0.5; file-m2's weighted
    # score (1.5) is above the threshold, its raw score is not.
    body = engine.post("/v1/responses", {"input": PROMPT, "include": INCLUDE, "tools": [
        tool("manuals", "faq", ranking_options={"score_threshold": 1.0})]}).ok()
    assert [(r["file_id"], r["score"]) for r in body["output"][0]["results"]] == [("file-m1", 7.5),
                                                                                  ("file-f1", 2.0)]


def test_a_store_that_times_out_is_an_error_the_model_reads(engine):
    events = stream(engine, {"input": PROMPT, "tools": [tool("slow")]})
    call, message = events[-1]["response"]["output"]
    assert call["type"] == "file_search_call" and call["status"] == "failed"
    assert "file_search_call.completed" in kinds(events)
    assert message["content"][0]["text"] == ("Tool said: Error: file_search failed: vector store vs_slow did not "
                                             "answer within 1 s")
    assert events[-1]["type"] == "response.completed"


def test_a_failing_store_is_left_out_and_named(engine):
    body = engine.post("/v1/responses", {"input": PROMPT, "include": INCLUDE,
                                         "tools": [tool("broken", "faq")]}).ok()
    call, message = body["output"]
    assert call["status"] == "completed" and [r["file_id"] for r in call["results"]] == ["file-f1", "file-f2"]
    assert "Not searched: vector store vs_broken answered HTTP 500" in message["content"][0]["text"]


def test_a_store_the_operator_did_not_configure_is_404_before_anything_runs(engine, stores, chat_upstream):
    clear_searches(stores)
    chat_upstream.clear()
    reply = engine.post("/v1/responses", {"input": PROMPT, "tools": [tool("vs_other_tenant")]})
    assert reply.status == 404, reply.body
    assert recorded_searches(stores) == [] and chat_upstream.requests(CHAT) == []


def test_the_next_turn_reads_the_search_again_and_may_cite_it(engine, chat_upstream):
    first = engine.post("/v1/responses", {"input": PROMPT, "include": INCLUDE, "tools": [tool("faq")]}).ok()
    chat_upstream.clear()
    second = engine.post("/v1/responses", {"input": "And what did it say?", "previous_response_id": first["id"]})
    assert second.status == 200, second.body
    system, *messages = chat_upstream.requests(CHAT)[0]["body"]["messages"]
    assert system == {"role": "system", "content": "You are a helpful assistant"}   # LCORE's default prompt
    assert [message["role"] for message in messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert messages[1]["tool_calls"][0]["function"] == {"name": "file_search", "arguments": f'{{"query":"{PROMPT}"}}'}
    assert "[1] <|file-f1|> faq.md (score 2)" in messages[2]["content"]


def test_a_function_named_file_search_beside_it_is_a_422(engine, chat_upstream):
    chat_upstream.clear()
    reply = engine.post("/v1/responses", {"input": PROMPT, "tools": [
        tool("faq"), {"type": "function", "name": "file_search", "parameters": {"type": "object"}}]})
    assert reply.status == 422, reply.body
    body = reply.json()
    assert body["error"]["param"] == "tools" and body["error"]["code"] == "unsupported_by_engine"
    assert "file_search" in body["detail"]["cause"]
    assert chat_upstream.requests(CHAT) == []


def test_a_client_that_goes_away_cancels_the_search(engine, stores):
    clear_searches(stores)
    sock = open_stream(engine.direct_port, {"input": PROMPT, "tools": [tool("patient")]})
    head, seen = read_until(sock, b"response.file_search_call.searching")
    assert seen, head
    # `searching` is emitted before the request is sent: leave once the store has it.
    wait_until(lambda: any(record["store"].startswith("vs_slow") for record in recorded_searches(stores)),
               "the search to reach the store", timeout=8)
    reset(sock)
    # The search request is abandoned at once, long before the store would answer (10 s).
    wait_until(lambda: any(record.get("cancelled") for record in recorded_searches(stores)),
               "the search to be cancelled", timeout=8)
