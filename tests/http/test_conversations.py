"""What LCORE's conversations endpoints read from the path and the query before any
lookup: the id in either form LCORE accepts (else its 400), and a page's `limit` and
`after` (FastAPI's 422 for a bad limit). (The endpoints: tests/e2e/test_conversations.py.)"""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.http.conversations import MAX_LIMIT, _page, path_conversation_id
from gateway.schema.errors import ApiError

HEX = "a" * 48


def in_path(conversation_id: str) -> str:
    request = make_mocked_request("GET", f"/v1/conversations/{conversation_id}",
                                  match_info={"conversation_id": conversation_id})
    return path_conversation_id(request)


def test_the_path_id_in_either_form_becomes_the_stored_one():
    assert in_path(HEX) == HEX and in_path(f"conv_{HEX}") == HEX and in_path(f"conv_{HEX.upper()}") == HEX
    assert in_path("123E4567-E89B-12D3-A456-426614174000") == "123e4567-e89b-12d3-a456-426614174000"
    for bad in ("conv_123", "not-an-id", f"conv_{'a' * 47}"):
        with pytest.raises(ApiError) as refused:
            in_path(bad)
        assert refused.value.status == 400 and refused.value.code == "invalid_conversation_id"
        assert refused.value.cause == f"The conversation ID {bad} has invalid format."


def test_a_page_without_a_query_is_everything():
    assert _page({}) == (None, None)
    assert _page({"limit": "1", "after": f"conv_{HEX}"}) == (1, HEX)
    assert _page({"limit": str(MAX_LIMIT)}) == (MAX_LIMIT, None)


@pytest.mark.parametrize("raw, kind, ctx", [
    ("ten", "int_parsing", None),
    ("0", "greater_than_equal", {"ge": 1}),
    (str(MAX_LIMIT + 1), "less_than_equal", {"le": MAX_LIMIT}),
])
def test_a_bad_limit_is_fastapis_422(raw, kind, ctx):
    with pytest.raises(ApiError) as refused:
        _page({"limit": raw})
    error = refused.value
    assert error.status == 422
    assert isinstance(error.detail, list)
    [item] = error.detail
    assert (item["type"], item["loc"], item["input"], item.get("ctx")) == (kind, ["query", "limit"], raw, ctx)


def test_a_bad_after_is_lcores_400():
    with pytest.raises(ApiError) as refused:
        _page({"after": "conv_nope"})
    assert refused.value.status == 400 and refused.value.code == "invalid_conversation_id"
