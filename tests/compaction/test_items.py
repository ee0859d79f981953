"""`compaction/items.py`: a turn's compaction items opened and replaced in place."""

from __future__ import annotations

import pytest

from gateway.compaction.items import SUMMARY_INTRO, expand, open_all, opened, summary_message
from gateway.compaction.seal import CompactionSeal
from gateway.config.compaction import CompactionKey
from gateway.schema.errors import ApiError

SEAL = CompactionSeal([CompactionKey(id="k", secret="s" * 32)])


def test_items_become_user_messages_in_place():
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": SEAL.seal("alice", "we spoke of teal")}
    sent = [{"role": "user", "content": "hi"}, item, {"role": "user", "content": "and now?"}]
    raw = {"input": sent}
    assert expand(SEAL, "alice", raw) is sent
    assert raw["input"] == [sent[0], {"type": "message", "role": "user", "content": SUMMARY_INTRO + "we spoke of teal"},
                            sent[2]]


@pytest.mark.parametrize("raw", [{"input": "text"}, {"input": [{"role": "user", "content": "x"}]}, {}, None, []])
def test_requests_without_items_are_untouched(raw):
    before = repr(raw)
    assert expand(SEAL, "alice", raw) is None
    assert repr(raw) == before


def test_without_keys_nothing_is_replaced():
    raw = {"input": [{"type": "compaction", "encrypted_content": "x"}]}
    assert expand(CompactionSeal([]), "alice", raw) is None and raw["input"][0]["type"] == "compaction"


@pytest.mark.parametrize("content, reason", [(None, "must be a string"), (7, "must be a string"),
                                             ("gwc1.zz.AAAA", "not configured"), ("junk", "not made by")])
def test_refusals_are_422_naming_the_item(content, reason):
    item = {"type": "compaction"} if content is None else {"type": "compaction", "encrypted_content": content}
    with pytest.raises(ApiError) as refused:
        expand(SEAL, "alice", {"input": [{"role": "user", "content": "x"}, item]})
    assert refused.value.status == 422 and refused.value.param == "input[1]"
    assert refused.value.code == "invalid_compaction_item" and reason in refused.value.cause


def test_another_users_item_is_refused():
    item = {"type": "compaction", "encrypted_content": SEAL.seal("bob", "bob's summary")}
    with pytest.raises(ApiError) as refused:
        expand(SEAL, "alice", {"input": [item]})
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
