"""The in-process registry of running streaming queries."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from gateway.legacy.interrupts import StreamRegistry, check_request_id
from gateway.schema.errors import ApiError


def test_interrupt_lifecycle():
    async def scenario():
        registry = StreamRegistry()
        task = asyncio.ensure_future(asyncio.sleep(30))
        request_id = str(uuid.uuid4())
        registry.add(request_id, "ann", task)
        with pytest.raises(ApiError) as other:
            registry.interrupt(request_id, "bob")
        assert other.value.status == 403
        assert registry.interrupt(request_id, "ann") is True and registry.was_interrupted(request_id)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert registry.interrupt(request_id, "ann") is False   # stopping already
        registry.finished(request_id)
        assert registry.interrupt(request_id, "ann") is False   # finished: remembered
        with pytest.raises(ApiError) as unknown:
            registry.interrupt(str(uuid.uuid4()), "ann")
        assert unknown.value.status == 404
    asyncio.run(scenario())


@pytest.mark.parametrize("value", ["abc", 12, None, ""])
def test_improper_ids(value):
    with pytest.raises(ApiError) as refused:
        check_request_id(value)
    assert refused.value.status == 422 and refused.value.detail[0]["msg"] == f"Value error, Improper request ID {value}"
