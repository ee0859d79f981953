from __future__ import annotations

import pytest

from gateway.schema.errors import ApiError
from gateway.schema.ids import (new_conversation_id, new_stored_conversation_id, normalize_conversation_id,
                                openai_conversation_id)

HEX = "0d21ba731f21f798dc9680125d5d6f493e4a7ab79f25670e"


@pytest.mark.parametrize("value, expected", [
    (HEX, HEX), (f"conv_{HEX}", HEX), (HEX.upper(), HEX), (f"conv_{HEX.upper()}", HEX),
    ("123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"),
    ("conv_123e4567-e89b-12d3-a456-426614174000", None),
    ("nope", None), (HEX[:-1], None), (f"conv_{HEX}0", None), ("", None),
])
def test_normalize(value, expected):
    assert normalize_conversation_id(value) == expected


def test_new_ids_round_trip():
    bare = new_conversation_id()
    assert len(bare) == 48 and normalize_conversation_id(openai_conversation_id(bare)) == bare


def test_a_uuid_id_is_returned_as_it_is():
    legacy = "123e4567-e89b-12d3-a456-426614174000"
    assert openai_conversation_id(legacy) == legacy and normalize_conversation_id(legacy) == legacy


def test_a_new_conversation_is_stored_under_the_upstreams_id_or_a_new_one():
    assert new_stored_conversation_id(f"conv_{HEX}") == HEX
    assert len(new_stored_conversation_id(None)) == 48
    for bad in ("conv_123e4567-e89b-12d3-a456-426614174000", "nope", "x" * 10_000):
        with pytest.raises(ApiError) as refused:
            new_stored_conversation_id(bad)
        assert (refused.value.status, refused.value.code) == (502, "upstream_invalid_conversation_id")
        assert len(refused.value.cause) < 200
