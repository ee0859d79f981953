"""What a run gives back: token usage summed over its model calls (whatever a server
sends as counts), approval requests read from their items. (Runs through `gateway
serve`: test_agent.py, test_stream.py.)"""

from __future__ import annotations

from gateway.sdk.results import ApprovalRequest, RunResult, Usage


def test_usage_sums_every_call_and_counts_the_calls():
    usage = Usage()
    usage.add({"input_tokens": 10, "output_tokens": 3, "total_tokens": 13})
    usage.add({"input_tokens": 5, "output_tokens": 2, "total_tokens": 7})
    assert usage == Usage(input_tokens=15, output_tokens=5, total_tokens=20, requests=2)


def test_a_call_without_usable_counts_still_counts_as_a_call():
    usage = Usage()
    usage.add(None)                                   # a server that sends no usage
    usage.add({"input_tokens": -4, "output_tokens": True, "total_tokens": "9"})
    usage.add({"input_tokens": 1.5})
    assert usage == Usage(requests=3)


def test_an_approval_request_from_its_item():
    item = {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "calc", "name": "add",
            "arguments": '{"a":2}'}
    assert ApprovalRequest.from_item(item) == ApprovalRequest("mcpr_1", "calc", "add", '{"a":2}')
    assert ApprovalRequest.from_item({"id": None}) == ApprovalRequest("", "", "", "")


def test_results_do_not_share_their_lists():
    first, second = RunResult(), RunResult()
    first.items.append({"type": "message"})
    first.usage.add({"input_tokens": 1})
    assert second.items == [] and second.usage == Usage()
