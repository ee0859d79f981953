"""`Preparer.prepare` and `Preparer.check` (`turns/prepare.py`): `compaction` input items
opened before anything else reads the request, the question kept as the client's words, a
refusal before anything is reserved or created; what `check()` found handed to `prepare()`
of the same body for the same user, which does not validate it again (a WebSocket turn
that runs as it arrives), any other body or user checked again (with the fakes of
`test_life.py`)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.compaction.items import SUMMARY_INTRO
from gateway.compaction.seal import CompactionSeal
from gateway.config.compaction import CompactionKey
from gateway.schema.errors import ApiError
from gateway.storage.conversations import ConversationRecord
from gateway.turns import prepare as prepare_module
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
    assert turn.plan.question == "and now?"


async def test_another_users_item_is_refused_before_anything_is_reserved(store):  # noqa: F811
    turns = life(store)
    turns.preparer._compaction = SEAL   # noqa: SLF001
    with pytest.raises(ApiError) as refused:
        await turns.prepare(input=[_item("bob")])
    assert refused.value.status == 422 and refused.value.code == "invalid_compaction_item"
    assert turns.quota.reserved == [] and turns.backend.conversations_created == 0


class _Items:
    """What `Preparer` asks of the conversation items store here: give items back."""

    def __init__(self) -> None:
        self.restored: list[tuple[str, tuple[str, ...]]] = []

    async def restore(self, conversation_id: str, item_ids: tuple[str, ...]) -> None:
        self.restored.append((conversation_id, item_ids))


def _conversation(owner: str = USER.user_id) -> ConversationRecord:
    return ConversationRecord("c1", owner, None, "2026-11-26T00:00:00Z", "2026-11-26T00:00:00Z", None, None, None, 0,
                              "", False)


async def test_added_items_are_opened_for_the_conversations_owner(store):  # noqa: F811
    turns = life(store)
    turns.preparer._compaction = SEAL   # noqa: SLF001
    added = [{"id": "msg_1", "type": "message", "role": "user", "content": "hi"}, {**_item("carol"), "id": "cmp_9"}]
    opened = await turns.preparer._opened_added(_conversation("carol"), added)   # noqa: SLF001
    assert opened == [added[0], {"type": "message", "role": "user", "content": SUMMARY_INTRO + "we agreed on teal",
                                 "id": "cmp_9"}]   # the id kept, to give it back


async def test_an_added_item_that_no_longer_opens_is_a_422_and_the_items_are_given_back(store):  # noqa: F811
    turns = life(store)
    items = _Items()
    turns.preparer._items = items   # noqa: SLF001
    turns.preparer._compaction = CompactionSeal([CompactionKey(id="new", secret="n" * 32)])   # `k` rotated out
    added = [{"id": "msg_1", "type": "message", "role": "user", "content": "hi"}, {**_item(), "id": "cmp_9"}]
    with pytest.raises(ApiError) as refused:
        await turns.preparer._opened_added(_conversation(), added)   # noqa: SLF001
    assert refused.value.status == 422 and refused.value.param == "conversation"
    assert "cmp_9 of the conversation" in refused.value.cause and "'k' is not configured" in refused.value.cause
    assert items.restored == [("c1", ("msg_1", "cmp_9"))]


async def test_a_checked_body_is_validated_once_and_only_for_itself(store, monkeypatch):  # noqa: F811
    turns = life(store)
    parsed: list[object] = []
    real = prepare_module.parse_responses_request
    monkeypatch.setattr(prepare_module, "parse_responses_request",
                        lambda raw, *args, **kwargs: parsed.append(raw) or real(raw, *args, **kwargs))
    raw = {"input": "hello", "stream": True}
    checked = await turns.preparer.check(USER, raw)
    assert parsed == [raw]
    turn = await turns.preparer.prepare(USER, raw, {}, checked=checked)
    assert parsed == [raw] and turn.plan.question == "hello"
    # Another body (a WebSocket continuation's, with the held context) or another user:
    # checked again.
    other = {**raw, "input": "again"}
    assert (await turns.preparer.prepare(USER, other, {}, checked=checked)).plan.question == "again"
    assert parsed == [raw, other]
    again = await turns.preparer.check(USER, raw)
    await turns.preparer.prepare(replace(USER, user_id="bob"), raw, {}, checked=again)
    assert parsed == [raw, other, raw, raw]


async def test_a_continuation_by_previous_response_id_reads_the_form_from_the_turns_row(store, monkeypatch):  # noqa: F811
    # The form of the turn it continues comes with that turn's record (its row's
    # `conversation_form`): its stored content is not read again.
    from tests.turns.test_life import Body
    turns = life(store)
    turns.preparer._conversation_form = "object"   # noqa: SLF001  (service.conversation_form)
    first = await turns.prepare()
    await turns.runner.run(first, Body())
    turns.preparer._conversation_form = "string"   # noqa: SLF001  (changed since: the turn's own form wins)

    async def unread(*args: object) -> None:
        raise AssertionError("the previous turn's content was read again")
    monkeypatch.setattr(turns.repository, "content", unread)
    turns.repository.forget("", ("resp_1",))   # read from the database, not the writer's cache
    second = await turns.prepare(previous_response_id="resp_1")
    assert second.plan.conversation_form == "object"
