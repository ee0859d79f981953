"""Responses output items as LCORE's legacy summaries: `tool_calls`, `tool_results`
numbered by round, `rag_chunks` and `referenced_documents` of file_search results."""

from __future__ import annotations

import json

from gateway.legacy.items import referenced_documents, summaries, tool_call, tool_result

SEARCH = {"type": "file_search_call", "id": "fs_1", "status": "completed", "queries": ["restart httpd"],
          "results": [{"file_id": "f1", "filename": "admin.txt", "score": 0.9, "text": "run systemctl",
                       "attributes": {"doc_url": "https://docs/a", "title": "Admin"}},
                      {"file_id": "f1", "filename": "admin.txt", "score": 0.5, "text": "or reboot",
                       "attributes": {"doc_url": "https://docs/a", "title": "Admin"}},
                      {"file_id": "f2", "filename": "faq.txt", "score": 0.4, "text": "see FAQ", "attributes": {}},
                      "not a result"]}
MCP = {"type": "mcp_call", "id": "mcp_1", "name": "add", "server_label": "calc", "arguments": '{"a":2,"b":3}',
       "output": "5"}
FUNCTION = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather",
            "arguments": "not json"}
MESSAGE = {"type": "message", "id": "msg_1", "content": []}


def test_each_tool_item_as_a_call_summary():
    assert tool_call(FUNCTION) == {"id": "call_1", "name": "get_weather", "args": {"arguments": "not json"},
                                   "type": "function_call"}
    assert tool_call(MCP) == {"id": "mcp_1", "name": "add", "args": {"a": 2, "b": 3, "server_label": "calc"},
                              "type": "mcp_call"}
    assert tool_call(SEARCH)["args"] == {"queries": ["restart httpd"]}
    assert tool_call({"type": "web_search_call", "id": "ws", "action": {"query": "q"}})["args"] == {"query": "q"}
    assert tool_call(MESSAGE) is None and tool_call({"type": "reasoning"}) is None


def test_results_say_success_or_failure():
    assert tool_result(MCP, 1) == {"id": "mcp_1", "status": "success", "content": "5", "type": "mcp_call",
                                   "round": 1}
    failed = tool_result({**MCP, "error": "tool crashed", "output": None}, 2)
    assert failed is not None and (failed["status"], failed["content"]) == ("failure", "tool crashed")
    listed = tool_result({"type": "mcp_list_tools", "id": "l", "server_label": "calc",
                          "tools": [{"name": "add", "description": "adds", "input_schema": {}, "annotations": {}}]}, 1)
    assert listed is not None and json.loads(listed["content"]) == {
        "server_label": "calc", "tools": [{"name": "add", "description": "adds", "input_schema": {}}]}
    assert tool_result(FUNCTION, 1) is None   # the client runs it: no result here


def test_a_turns_summaries_number_rounds_and_skip_client_calls():
    calls, results, chunks = summaries([MESSAGE, FUNCTION, SEARCH, MCP])
    assert [call["type"] for call in calls] == ["function_call", "file_search_call", "mcp_call"]
    assert [(result["id"], result["round"]) for result in results] == [("fs_1", 1), ("mcp_1", 2)]
    assert [chunk["content"] for chunk in chunks] == ["run systemctl", "or reboot", "see FAQ"]
    assert chunks[0]["source"] == "admin.txt" and chunks[0]["score"] == 0.9


def test_referenced_documents_once_each_in_order():
    assert referenced_documents([MESSAGE, SEARCH]) == [
        {"doc_url": "https://docs/a", "doc_title": "Admin", "source": None, "document_id": "f1"},
        {"doc_url": None, "doc_title": "faq.txt", "source": None, "document_id": "f2"},
    ]
