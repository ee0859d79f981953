"""A request's estimate (quota/reservation.py) and a reservation's end on its holds."""

from __future__ import annotations

import orjson
import pytest

from gateway.quota.holds import Hold
from gateway.quota.reservation import Reservation, estimate


@pytest.mark.parametrize("raw, tokens", [
    ({"input": "hi", "max_output_tokens": 99}, 1 + 99),                  # '"hi"': 4 characters
    ({"input": "x" * 10}, 3 + 1024),                                     # 12 characters, rounded up
    ({"input": [{"role": "user", "content": "hi"}], "max_output_tokens": 10}, 8 + 10),   # its JSON text: 32
    ({"input": "hi", "instructions": "be brief", "max_output_tokens": 5}, 3 + 5),        # 4 + 8 characters
    ({"input": "hi", "max_output_tokens": 0}, 1 + 1024),                 # not a positive integer: the default
    ({"input": "hi", "max_output_tokens": True}, 1 + 1024),
    ({"instructions": 7}, 0 + 1024),                                     # no input, instructions not text
])
def test_the_estimate_is_the_request_text_at_four_characters_a_token_plus_the_output(raw, tokens):
    assert estimate(raw, output_reservation=1024) == tokens


def test_a_reservation_ends_once_on_its_holds():
    holds = (Hold("a", "daily", "ann", held=500, used=300), Hold("b", "cluster", "", held=900, used=300))
    reservation = Reservation("ann", 100, (), holds=holds)
    reservation.end(released=True)
    reservation.end(released=False)   # a second report of the same end changes nothing
    assert [(hold.held, hold.used) for hold in holds] == [(400, 200), (800, 200)]
    kept = Reservation("ann", 100, (), holds=holds)
    kept.end(released=False)          # its charge was not written: the tokens stay held, as spare
    assert [(hold.held, hold.used) for hold in holds] == [(400, 100), (800, 100)]


def test_the_context_estimate_counts_history_tools_and_rag():
    from gateway.quota.reservation import RAG_RESULT_TOKENS, context_estimate, output_tokens

    assert context_estimate(0, None) == 0
    assert context_estimate(1234, None) == 1234
    tools = [{"type": "function", "name": "f", "parameters": {"type": "object"}}]
    assert context_estimate(0, tools) == -(-len(orjson.dumps(tools)) // 4)
    searching = [{"type": "file_search", "vector_store_ids": ["vs"], "max_num_results": 3}]
    assert context_estimate(0, searching) == -(-len(orjson.dumps(searching)) // 4) + 3 * RAG_RESULT_TOKENS
    assert output_tokens({"max_output_tokens": 7}, 1024) == 7 and output_tokens({}, 1024) == 1024
