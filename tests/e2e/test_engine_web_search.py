"""The local engine's web_search executor through `gateway serve` (llama_stack.api:
chat_completions) in front of the scripted Chat Completions upstream and a loopback
fake of the search endpoint (tests/support/search_server.py)."""

from __future__ import annotations

import re
import time

import pytest
import yaml

from tests.support.engine_gateway import engine_config
from tests.support.flows import checked, kinds
from tests.support.openai_shapes import replay_through_sdk, validate_response
from tests.support.search_server import recorded_searches, running_search_server

CHAT = "/v1/chat/completions"
SEARCH_KEY = "search-s3cret-key"
WEB = {"type": "web_search"}
SOURCES = ["web_search_call.action.sources"]


@pytest.fixture(scope="module")
def search(tmp_path_factory):
    yield from running_search_server(tmp_path_factory)


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream, search):
    return gateway_factory(chat_upstream.url, **engine_config(
        chat_upstream.url, web_search={"url": search.url, "api_key": SEARCH_KEY, "timeout": 2, "max_results": 2}))


def stream(gateway, body):
    status, frames = gateway.stream(body)
    assert status == 200, frames
    return checked(frames)  # numbered from 0, every event an `openai` type


def test_a_search_streams_its_item_and_the_answer_cites_it(engine, chat_upstream, search):
    events = stream(engine, {"input": "search the web for gateway news", "tools": [WEB]})
    deltas = kinds(events).count("output_text.delta")
    annotations = kinds(events).count("output_text.annotation.added")
    assert kinds(events) == [
        "created", "in_progress",
        "output_item.added", "web_search_call.in_progress", "web_search_call.searching",
        "web_search_call.completed", "output_item.done",
        "output_item.added", "content_part.added", *["output_text.delta"] * deltas,
        *["output_text.annotation.added"] * annotations, "output_text.done", "content_part.done",
        "output_item.done", "completed"]
    added = events[2]["item"]
    assert added["type"] == "web_search_call" and added["status"] == "in_progress"
    assert added["action"] == {"type": "search"} and "arguments" not in added
    call, message = events[-1]["response"]["output"]
    assert call == {"id": added["id"], "type": "web_search_call", "status": "completed",
                    "action": {"type": "search", "query": "search the web for gateway news"}}
    assert all(event["item_id"] == call["id"] for event in events[3:6])
    # The endpoint got the query, the configured limit and key.
    request = recorded_searches(search)[-1]
    assert request["json"] == {"query": "search the web for gateway news", "max_results": 2,
                               "search_context_size": "medium"}
    assert request["headers"]["authorization"] == f"Bearer {SEARCH_KEY}"
    # The model read numbered results and cited them; the markers are url_citations.
    tool_message = chat_upstream.requests(CHAT)[-1]["body"]["messages"][-1]
    assert tool_message["role"] == "tool" and "[1] Result 1 for search the web for gateway news" in \
        tool_message["content"] and "URL: https://example.com/search-the-web-for-gateway-news/2" in \
        tool_message["content"]
    text = message["content"][0]["text"]
    assert text.startswith("Tool said: Web search results for")
    found = message["content"][0]["annotations"]
    assert annotations == len(found) >= 1
    first = found[0]
    assert first["type"] == "url_citation" and text[first["start_index"]:first["end_index"]] == "[1]"
    assert first["url"] == "https://example.com/search-the-web-for-gateway-news/1"
    assert first["title"] == "Result 1 for search the web for gateway news"
    added_events = [event for event in events if event["type"] == "response.output_text.annotation.added"]
    assert [event["annotation"] for event in added_events] == found
    assert [event["annotation_index"] for event in added_events] == list(range(len(found)))
    final = replay_through_sdk(events)  # the SDK's responses.stream() accumulator takes it
    assert final.output[0].type == "web_search_call" and final.output_text == text


def test_sources_only_when_include_asks_and_the_json_body(engine):
    body = engine.post("/v1/responses", {"input": "search for llama facts", "tools": [WEB],
                                         "include": SOURCES}).ok()
    validate_response(body)
    call, message = body["output"]
    assert call["status"] == "completed" and call["action"]["query"] == "search for llama facts"
    assert call["action"]["sources"] == [{"type": "url", "url": "https://example.com/search-for-llama-facts/1"},
                                         {"type": "url", "url": "https://example.com/search-for-llama-facts/2"}]
    assert message["content"][0]["annotations"][0]["url"] == "https://example.com/search-for-llama-facts/1"
    # The stored response is the same; the next turn reads the earlier search from the history.
    assert engine.get(f"/v1/responses/{body['id']}").ok()["output"] == body["output"]
    follow = engine.post("/v1/responses", {"input": "thanks", "previous_response_id": body["id"]}).ok()
    assert follow["status"] == "completed" and follow["output"][0]["type"] == "message"


def failed_search(gateway, query):
    events = stream(gateway, {"input": query, "tools": [WEB]})
    call, message = events[-1]["response"]["output"]
    assert call["type"] == "web_search_call" and call["status"] == "failed"
    # No `web_search_call.failed` event exists in the openai types: the lifecycle ends
    # with `….completed` (as Llama Stack's file_search does) and the item says it failed.
    assert kinds(events)[2:7] == ["output_item.added", "web_search_call.in_progress", "web_search_call.searching",
                                  "web_search_call.completed", "output_item.done"]
    assert events[-1]["type"] == "response.completed"
    return call, message["content"][0]["text"]


def test_an_endpoint_error_is_fed_back_and_the_item_fails(engine):
    call, answer = failed_search(engine, "search this broken-search please")
    assert call["action"]["query"] == "search this broken-search please"
    assert answer == "Tool said: Error: The web search failed: The web search service failed (HTTP 500)"


def test_a_malformed_answer_is_an_error(engine):
    _, answer = failed_search(engine, "search malformed-search")
    assert answer == "Tool said: Error: The web search failed: the web search service answered without a " \
                     "`results` list"


def test_a_silent_endpoint_times_out_and_the_turn_goes_on(engine):
    _, answer = failed_search(engine, "search slow-search now")
    assert answer == "Tool said: Error: The web search failed: The web search service did not answer within 2 s"


def test_no_results(engine):
    events = stream(engine, {"input": "search empty-search", "tools": [WEB]})
    call, message = events[-1]["response"]["output"]
    assert call["status"] == "completed" and message["content"][0]["annotations"] == []
    assert message["content"][0]["text"] == "Tool said: The web search for 'search empty-search' found nothing."


@pytest.fixture(scope="module")
def unreachable(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, **engine_config(
        chat_upstream.url, web_search={"url": "http://127.0.0.1:9/search", "timeout": 2}))


def test_an_unreachable_endpoint_is_an_error_result(unreachable):
    _, answer = failed_search(unreachable, "search the web")
    assert answer == "Tool said: Error: The web search failed: The web search service could not be reached"


@pytest.fixture(scope="module")
def unconfigured(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url))


def test_without_a_configured_endpoint_the_tool_is_refused(unconfigured, chat_upstream):
    chat_upstream.clear()
    reply = unconfigured.post("/v1/responses", {"input": "search the web", "tools": [WEB]})
    assert reply.status == 422, reply.body
    assert reply.json()["error"]["param"] == "tools" and "web_search" in reply.json()["detail"]["cause"]
    assert chat_upstream.requests(CHAT) == []


def test_the_tool_echo_and_a_function_tool_beside_it(engine, chat_upstream):
    weather = {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    body = engine.post("/v1/responses", {"input": "use web_search to find the weather", "tools": [weather, WEB]}).ok()
    assert [tool["type"] for tool in body["tools"]] == ["function", "web_search"]
    sent = chat_upstream.requests(CHAT)[-2]["body"]
    assert [tool["function"]["name"] for tool in sent["tools"]] == ["get_weather", "web_search"]
    assert sent["tools"][1]["function"]["parameters"]["required"] == ["query"]
    assert [item["type"] for item in body["output"]] == ["web_search_call", "message"]


def test_a_forced_web_search_and_the_sdks_stream(engine, chat_upstream):
    """The `openai` SDK's own `responses.stream()` over the gateway's stream; a
    `tool_choice` of the web_search type forces the search in the first round only."""
    with engine.client().responses.stream(model="scripted-chat", input="hello", tools=[WEB],
                                          tool_choice={"type": "web_search_preview"},
                                          include=SOURCES) as events:
        kinds_seen = [event.type for event in events]
        final = events.get_final_response()
    assert "response.web_search_call.searching" in kinds_seen
    call, message = final.output
    assert call.type == "web_search_call" and call.action.query == "hello"
    assert [source.url for source in call.action.sources] == ["https://example.com/hello/1",
                                                              "https://example.com/hello/2"]
    assert message.content[0].annotations[0].type == "url_citation"
    first, second = [r["body"] for r in chat_upstream.requests(CHAT)[-2:]]
    assert first["tool_choice"] == {"type": "function", "function": {"name": "web_search"}}
    assert second["tool_choice"] == "auto"


def test_forcing_web_search_without_the_tool_is_refused(engine):
    reply = engine.post("/v1/responses", {"input": "hi", "tool_choice": {"type": "web_search"}})
    assert reply.status == 422 and reply.json()["error"]["param"] == "tool_choice"


def test_a_round_mixing_a_function_call_and_a_search_pauses_whole(engine, search):
    """Spec 002: the client's function call goes back to the client and the search is
    not run: its item fails."""
    weather = {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    before = len(recorded_searches(search))
    events = stream(engine, {"input": "use parallel-calls for the weather", "tools": [weather, WEB]})
    output = events[-1]["response"]["output"]
    assert [item["type"] for item in output] == ["function_call", "web_search_call"]
    assert output[1]["status"] == "failed" and "error" not in output[1]
    assert events[-1]["response"]["status"] == "completed"
    assert len(recorded_searches(search)) == before  # never searched


def test_allowed_tools_by_an_entry_of_the_search_type(engine):
    weather = {"type": "function", "name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
    choice = {"type": "allowed_tools", "mode": "auto", "tools": [{"type": "web_search"}]}
    body = engine.post("/v1/responses", {"input": "use web_search please", "tools": [weather, WEB],
                                         "tool_choice": choice}).ok()
    assert [(item["type"], item["status"]) for item in body["output"]] == [("web_search_call", "completed"),
                                                                            ("message", "completed")]


@pytest.fixture(scope="module")
def tripping(gateway_factory, chat_upstream):
    """An unreachable search provider behind a circuit breaker that opens after 2 failures."""
    config = engine_config(chat_upstream.url, web_search={"url": "http://127.0.0.1:9/search", "timeout": 2})
    config["llama_stack"] = {**config["llama_stack"], "circuit_breaker_failures": 2,
                             "circuit_breaker_cooldown_seconds": 60}
    return gateway_factory(chat_upstream.url, **config)


def test_a_failing_providers_circuit_opens_and_its_calls_fail_at_once(tripping):
    for _ in range(2):
        _, answer = failed_search(tripping, "search the web")
        assert answer == "Tool said: Error: The web search failed: The web search service could not be reached"
    started = time.monotonic()
    _, answer = failed_search(tripping, "search the web")
    assert time.monotonic() - started < 5
    assert re.fullmatch(r"Tool said: Error: The web search failed: The web search service is failing: not asked "
                        r"\(circuit open after 2 failure\(s\) in a row; next try in \d+ s\)", answer), answer
    # Its own series (the upstream's beside it, closed), and a log line for the change.
    metrics = tripping.get("/metrics").body.decode()
    assert 'gateway_upstream_circuit_state{upstream="http://127.0.0.1:9/search"} 2.0' in metrics
    assert f'gateway_upstream_circuit_state{{upstream="{tripping_upstream(tripping)}"}} 0.0' in metrics
    assert "upstream http://127.0.0.1:9/search: circuit closed -> open" in tripping.messages()
    # An optional provider's circuit does not make the replica unready (its turns go on).
    assert tripping.get("/readiness").status == 200


def tripping_upstream(gateway) -> str:
    return yaml.safe_load(gateway.config_path.read_text())["llama_stack"]["url"].rstrip("/")
