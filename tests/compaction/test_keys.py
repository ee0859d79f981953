"""Which keys seal and open: configured ones first, the generated one made only when none
are configured and kept as an opener after them."""

from __future__ import annotations

from gateway.compaction.keys import SETTING, compaction_keys
from gateway.compaction.seal import CompactionSeal
from gateway.config.compaction import CompactionKey
from gateway.config.database import DatabaseConfig
from gateway.storage.generated_keys import GeneratedKeys
from gateway.storage.open import open_database

K1 = CompactionKey(id="k1", secret="k" * 32)


async def test_generated_when_none_configured_then_kept_as_an_opener(tmp_path):
    db = await open_database(DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "g.db")}}))
    stored = GeneratedKeys(db)
    assert await compaction_keys([K1], stored) == [K1]   # configured, nothing generated
    assert await stored.get(SETTING) is None
    generated = await compaction_keys([], stored)
    assert len(generated) == 1 and generated[0].id.startswith("auto-") and len(generated[0].secret) >= 32
    assert await compaction_keys([], stored) == generated   # the same one every start
    sealed = CompactionSeal(generated).seal("alice", "summary")
    later = await compaction_keys([K1], stored)
    assert later == [K1, generated[0]]
    seal = CompactionSeal(later)
    assert seal.open("alice", sealed) == "summary"   # still opens
    assert seal.seal("alice", "new").startswith("gwc1.k1.")   # the configured key seals
    await db.close()


def test_use_changes_the_keys_of_one_seal():
    seal = CompactionSeal([])
    assert not seal.enabled
    seal.use([K1])
    assert seal.enabled and seal.open("bob", seal.seal("bob", "x")) == "x"
