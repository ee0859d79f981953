"""`Preparer.prepare` with `compaction` input items: opened before anything else reads
the request, the question kept as the client's words, a refusal before anything is
reserved or created (with the fakes of `test_life.py`)."""

from __future__ import annotations

import pytest

from gateway.compaction.items import SUMMARY_INTRO
from gateway.compaction.seal import CompactionSeal
from gateway.config.compaction import CompactionKey
from gateway.schema.errors import ApiError
from tests.turns.test_life import USER, life, store  # noqa: F401  (the fixture)

SEAL = CompactionSeal([CompactionKey(id="k", secret="s" * 32)])


def _item(user: str = USER.user_id) -> dict:
    return {"type": "compaction", "id": "cmp_1", "encrypted_content": SEAL.seal(user, "we agreed on teal")}


async def test_an_item_becomes_the_summary_message_and_not_the_question(store):  # noqa: F811
    turns = life(store)
    turns.preparer._compaction = SEAL   # noqa: SLF001  (what response_compaction.keys makes)
    turn = await turns.prepare(input=[_item(), {"type": "message", "role": "user", "content": "and now?"}])
    assert turn.body["input"][0] == {"type": "message", "role": "user", "content": SUMMARY_INTRO + "we agreed on teal"}
    assert "instructions" not in turn.body or "teal" not in str(turn.body["instructions"])
    assert turn.question == "and now?"


async def test_another_users_item_is_refused_before_anything_is_reserved(store):  # noqa: F811
    turns = life(store)
    turns.preparer._compaction = SEAL   # noqa: SLF001
    with pytest.raises(ApiError) as refused:
        await turns.prepare(input=[_item("bob")])
    assert refused.value.status == 422 and refused.value.code == "invalid_compaction_item"
    assert turns.quota.reserved == [] and turns.backend.conversations_created == 0
