"""A generated secret, made once per database on both engines: the first process's value
wins, every later one (and a concurrent one) reads it."""

from __future__ import annotations

import asyncio

from gateway.storage.generated_keys import GeneratedKeys
from gateway.storage.open import open_database


async def test_made_once_and_read_by_everyone(database_config):
    first, second = await open_database(database_config), await open_database(database_config)
    made = iter(range(100))
    assert await GeneratedKeys(first).get("k") is None
    values = await asyncio.gather(*(GeneratedKeys(db).get_or_create("k", lambda: {"n": next(made)})
                                    for db in (first, second, first, second)))
    assert len({value["n"] for value in values}) == 1   # one winner, whoever asked
    assert await GeneratedKeys(second).get("k") == values[0]
    assert await GeneratedKeys(first).get_or_create("other", lambda: {"n": -1}) == {"n": -1}
    await first.close()
    await second.close()
