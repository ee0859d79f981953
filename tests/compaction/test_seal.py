"""`compaction/seal.py`: what a client cannot do with an item, and key rotation."""

from __future__ import annotations

import base64

import pytest

from gateway.compaction.seal import CompactionSeal, SealError, UnknownKey
from gateway.config.compaction import CompactionKey

OLD = CompactionKey(id="old", secret="o" * 32)
NEW = CompactionKey(id="new", secret="n" * 32)


def test_round_trip_is_opaque_and_bound_to_the_user():
    seal = CompactionSeal([OLD])
    sealed = seal.seal("alice", "the launch code is 1234")
    assert sealed.startswith("gwc1.old.") and "1234" not in sealed
    assert seal.open("alice", sealed) == "the launch code is 1234"
    with pytest.raises(SealError, match="another user"):
        seal.open("bob", sealed)
    assert seal.seal("alice", "same") != seal.seal("alice", "same")   # a fresh nonce each time


def test_every_altered_byte_is_refused():
    seal = CompactionSeal([OLD])
    sealed = seal.seal("alice", "summary")
    raw = bytearray(base64.urlsafe_b64decode(sealed.split(".")[2] + "=="))
    for index in range(len(raw)):
        changed = bytearray(raw)
        changed[index] ^= 1
        body = base64.urlsafe_b64encode(bytes(changed)).decode().rstrip("=")
        with pytest.raises(SealError):
            seal.open("alice", f"gwc1.old.{body}")


def test_a_key_id_cannot_be_swapped_for_another_configured_key():
    both = CompactionSeal([NEW, OLD])
    sealed = CompactionSeal([OLD]).seal("alice", "summary")
    with pytest.raises(SealError):
        both.open("alice", sealed.replace("gwc1.old.", "gwc1.new."))


def test_rotation_newest_seals_older_still_opens():
    old_item = CompactionSeal([OLD]).seal("alice", "before rotation")
    rotated = CompactionSeal([NEW, OLD])
    assert rotated.open("alice", old_item) == "before rotation"
    assert rotated.seal("alice", "after").startswith("gwc1.new.")
    with pytest.raises(UnknownKey, match="'old' is not configured"):
        CompactionSeal([NEW]).open("alice", old_item)


@pytest.mark.parametrize("content", ["", "gwc1", "gwc1.old", "gwc2.old.AAAA", "gwc1.old.!!!!", "gwc1.old.AAAA",
                                     "gAAAAABpM0Yj-openai-item", "gwc1.old.a.b"])
def test_malformed_items_are_seal_errors(content):
    with pytest.raises(SealError):
        CompactionSeal([OLD]).open("alice", content)


def test_no_keys_is_disabled():
    assert not CompactionSeal([]).enabled and CompactionSeal([OLD]).enabled


def test_any_user_id_string_is_associated_data():
    seal = CompactionSeal([OLD])
    odd = "user\ud800\0with nul"
    assert seal.open(odd, seal.seal(odd, "x")) == "x"
    with pytest.raises(SealError):
        seal.open("user", seal.seal(odd, "x"))
