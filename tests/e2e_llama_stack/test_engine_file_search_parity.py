"""file_search in the local engine against a real Llama Stack 0.7.3, and parity with
Llama Stack's own loop.

The engine runs in front of Llama Stack's `/v1/chat/completions` (the scripted
upstream behind it as the model provider) and searches the real vector store the
`handbook` fixture created, through Llama Stack's `POST /v1/vector_stores/{id}/search`
(the upstream: `byok_rag` names no `search_url`). Forward mode in front of the same
Llama Stack runs Llama Stack's own file_search over the same store and model.

Allowed differences, each with its reason (besides those of test_engine_parity.py):
- `response.output_text.annotation.added`: the engine turns the answer's citation
  markers into `file_citation` annotations as the text streams; Llama Stack 0.7.3
  streams the markers as text and never annotates a streamed answer (its streaming
  path builds `output_text` with `annotations=[]`). The engine's annotation events are
  left out before comparing, and asserted instead.
- What the model reads: Llama Stack's text (`BEGIN of file_search tool results.` …,
  the marker after a chunk's metadata) and the engine's (`file_search.py`: the marker
  first), so the scripted model's echo, and the answers, differ; only types are compared,
  and a run of `output_text.delta` events counts as one (their number follows the text).
- `filename` in results: Llama Stack puts the file id there; the engine the file's name
  (what the search API answered, and what OpenAI shows).
- `queries` in `output_item.added`: `[]` on the engine's side (the item is announced
  when the call begins, before its arguments are complete); Llama Stack announces it
  after the arguments, with the query. Items are compared by type, so this is not seen.
"""

from __future__ import annotations

import pytest

from tests.support.gateway_proc import Gateway
from tests.support.openai_shapes import replay_through_sdk, validate_response

from .conftest import DEFAULT_MODEL, Chain, Handbook
from .helpers import checked, done_runs_unordered, kinds

pytestmark = pytest.mark.llama_stack
PROMPT = "search the handbook for the Falcon launch code"
INCLUDE = ["file_search_call.results"]
ANNOTATION = "output_text.annotation.added"


@pytest.fixture(scope="module")
def engine(chain: Chain, handbook: Handbook, gateway_factory) -> Gateway:
    return gateway_factory(chain.stack.url, inference=DEFAULT_MODEL,
                           llama_stack={"url": chain.stack.url, "max_retries": 0, "api": "chat_completions"},
                           byok_rag=[{"rag_id": "handbook", "vector_db_id": handbook.vector_store_id}])


def test_the_engine_searches_llama_stacks_store_and_cites_it(engine: Gateway, handbook: Handbook):
    body = engine.post("/v1/responses", {"input": PROMPT, "include": INCLUDE}).ok()
    validate_response(body)
    call, message = body["output"]
    assert call["type"] == "file_search_call" and call["status"] == "completed" and call["queries"] == [PROMPT]
    [result] = call["results"]
    assert (result["file_id"], result["filename"]) == (handbook.file_id, "handbook.txt")
    assert "7-alpha-9" in result["text"] and result["score"] > 0
    part = message["content"][0]
    assert part["text"].startswith(f'Tool said: file_search found 1 chunks for "{PROMPT}".\n[1] handbook.txt')
    assert part["annotations"] == [{"type": "file_citation", "file_id": handbook.file_id,
                                    "filename": "handbook.txt", "index": part["text"].index("[1]") + 3}]


def run(gateway: Gateway, body: dict) -> tuple[list[str], list[str], list[dict]]:
    status, frames = gateway.stream(body)
    assert status == 200, frames
    events = checked(frames)  # numbered from 0, every event an `openai` type
    final = replay_through_sdk(events)  # the SDK's responses.stream() consumes them
    assert final is not None and final.output_text == events[-1]["response"]["output_text"]
    return kinds(events), [item["type"] for item in events[-1]["response"]["output"]], events


def deltas_as_one(names: list[str]) -> list[str]:
    return [name for n, name in enumerate(names) if name != "output_text.delta" or names[n - 1] != name]


def test_a_file_search_flow_alike(chain: Chain, engine: Gateway, handbook: Handbook):
    body = {"input": PROMPT, "include": INCLUDE}
    forward_names, forward_items, forward = run(handbook.gateway, body)
    engine_names, engine_items, local = run(engine, body)
    assert engine_items == forward_items == ["file_search_call", "message"]
    assert ANNOTATION in engine_names and ANNOTATION not in forward_names
    engine_names = [name for name in engine_names if name != ANNOTATION]
    assert deltas_as_one(done_runs_unordered(engine_names)) == deltas_as_one(done_runs_unordered(forward_names))
    assert engine_names[:7] == ["created", "in_progress", "output_item.added", "file_search_call.in_progress",
                                "file_search_call.searching", "file_search_call.completed", "output_item.done"]
    for events in (forward, local):
        call = events[-1]["response"]["output"][0]
        assert call["queries"] == [PROMPT] and call["results"][0]["file_id"] == handbook.file_id
