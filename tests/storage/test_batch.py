"""A batch's statements run in their lock order, whatever order the participants made
them in, so two concurrent batches cannot deadlock on the rows they lock."""

from __future__ import annotations

from gateway.storage.batch import in_lock_order


def test_statements_are_sorted_by_their_lock_key_only():
    first = {"n": 1}
    keyed = [("balance\0monthly\0ann", "UPDATE b", first),
             ("balance\0daily\0bo", "UPDATE a", {"n": 2}),
             ("balance\0daily\0ann", "UPDATE c", {"n": 3})]
    assert in_lock_order(keyed) == [("UPDATE c", {"n": 3}), ("UPDATE a", {"n": 2}), ("UPDATE b", first)]
    assert in_lock_order(keyed)[2][1] is first   # the parameters are passed on, not copied


def test_equal_keys_keep_their_order_and_any_iterable_is_taken():
    # Two statements on one row: the sort is stable, so a participant's order on a row holds.
    keyed = (statement for statement in [("k", "second", {}), ("a", "first", {}), ("k", "third", {})])
    assert [sql for sql, _ in in_lock_order(keyed)] == ["first", "second", "third"]
    assert in_lock_order([]) == []
