"""`compaction/items.py`: a turn's compaction items opened and replaced in place."""

from __future__ import annotations

import pytest

from gateway.compaction.items import SUMMARY_INTRO, open_all, open_compactions, opened, summary_message
from gateway.compaction.seal import CompactionSeal
from gateway.config.compaction import CompactionKey
from gateway.schema.errors import ApiError

SEAL = CompactionSeal([CompactionKey(id="k", secret="s" * 32)])


def test_items_become_user_messages_in_a_new_list():
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": SEAL.seal("alice", "we spoke of teal")}
    sent = [{"role": "user", "content": "hi"}, item, {"role": "user", "content": "and now?"}]
    before = repr(sent)
    assert open_compactions(SEAL, "alice", sent) == [
        sent[0], {"type": "message", "role": "user", "content": SUMMARY_INTRO + "we spoke of teal"}, sent[2]]
    assert repr(sent) == before   # the client's input is left as it is


@pytest.mark.parametrize("input_", ["text", [{"role": "user", "content": "x"}], None, [], {}])
def test_inputs_without_items_are_untouched(input_):
    before = repr(input_)
    assert open_compactions(SEAL, "alice", input_) is None
    assert repr(input_) == before


def test_without_keys_nothing_is_replaced():
    assert open_compactions(CompactionSeal([]), "alice", [{"type": "compaction", "encrypted_content": "x"}]) is None


@pytest.mark.parametrize("content, reason", [(None, "must be a string"), (7, "must be a string"),
                                             ("gwc1.zz.AAAA", "not configured"), ("junk", "not made by")])
def test_refusals_are_422_naming_the_item(content, reason):
    item = {"type": "compaction"} if content is None else {"type": "compaction", "encrypted_content": content}
    with pytest.raises(ApiError) as refused:
        open_compactions(SEAL, "alice", [{"role": "user", "content": "x"}, item])
    assert refused.value.status == 422 and refused.value.param == "input[1]"
    assert refused.value.code == "invalid_compaction_item" and reason in refused.value.cause


def test_another_users_item_is_refused():
    item = {"type": "compaction", "encrypted_content": SEAL.seal("bob", "bob's summary")}
    with pytest.raises(ApiError) as refused:
        open_compactions(SEAL, "alice", [item])
    assert "bob's summary" not in str(refused.value.body())


def test_open_all_replaces_items_of_a_list_naming_its_field():
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": SEAL.seal("alice", "teal")}
    plain = {"type": "message", "role": "user", "content": "x"}
    assert open_all(SEAL, "alice", [plain, item], "items") == [plain, summary_message("teal")]
    with pytest.raises(ApiError) as refused:
        open_all(SEAL, "bob", [plain, item], "items")
    assert refused.value.param == "items[1]" and "teal" not in str(refused.value.body())


def test_without_keys_an_item_to_open_is_refused_saying_so():
    with pytest.raises(ApiError) as refused:
        opened(CompactionSeal([]), "alice", {"type": "compaction", "encrypted_content": "gwc1.k.AAAA"},
               "cmp_1 of the conversation", "conversation")
    assert refused.value.status == 422 and refused.value.param == "conversation"
    assert "no compaction keys configured" in refused.value.cause and "cmp_1 of the conversation" in refused.value.cause
