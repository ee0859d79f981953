"""The `response_compaction` section."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from gateway.config.compaction import DEFAULT_PROMPT, ResponseCompactionConfig

SECRET = "x" * 32


def test_defaults_are_off():
    config = ResponseCompactionConfig()
    assert config.keys == [] and config.prompt == DEFAULT_PROMPT and config.max_input_bytes == 1024 * 1024


@pytest.mark.parametrize("keys", [
    [{"id": "a", "secret": "short"}],                                   # under 32 characters
    [{"id": "a.b", "secret": SECRET}],                                  # the id is part of the item's format
    [{"id": "a", "secret": SECRET}, {"id": "a", "secret": SECRET + "y"}],   # ids unique
    [{"id": "a", "secret": SECRET, "extra": 1}],
])
def test_bad_keys_fail_start_up(keys):
    with pytest.raises(ValidationError):
        ResponseCompactionConfig(keys=keys)


def test_a_secret_is_not_in_the_repr():
    config = ResponseCompactionConfig(keys=[{"id": "a", "secret": SECRET}])
    assert SECRET not in repr(config)
