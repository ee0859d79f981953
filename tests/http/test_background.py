"""What a background response's retrieve reads from its query: `stream` (true or false,
nothing else) and `starting_after` (a sequence number, or -1 for from the start).
(Create, follow, resume and cancel: tests/e2e/test_background.py.)"""

from __future__ import annotations

import pytest
from aiohttp.test_utils import make_mocked_request

from gateway.http.background import _streaming
from gateway.schema.errors import ApiError


def streaming(query: str) -> tuple[bool, int]:
    return _streaming(make_mocked_request("GET", f"/v1/responses/resp_1?{query}"))


def test_stream_and_starting_after():
    assert streaming("") == (False, -1)
    assert streaming("stream=true") == (True, -1)
    assert streaming("stream=TRUE&starting_after=7") == (True, 7)
    assert streaming("stream=false&starting_after=0") == (False, 0)
    assert streaming("starting_after=-1") == (False, -1)


@pytest.mark.parametrize("query, param", [
    ("stream=yes", "stream"), ("stream=1", "stream"),
    ("starting_after=-2", "starting_after"), ("starting_after=x", "starting_after"),
    ("starting_after=1.5", "starting_after"),
])
def test_anything_else_is_a_422_naming_the_parameter(query, param):
    with pytest.raises(ApiError) as refused:
        streaming(query)
    assert refused.value.status == 422 and refused.value.param == param
