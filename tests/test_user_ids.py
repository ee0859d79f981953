"""How log lines name users (gateway/user_ids.py): the keyed hash, cut as the access
line cuts it, or the raw id; and a refusal's cause with its user named that way."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from gateway import user_ids
from gateway.schema.errors import conversation_forbidden, endpoint_forbidden
from gateway.user_ids import LoggedUsers, UserHasher, logged_user


def test_hashed_raw_and_nobody():
    hasher = UserHasher({"OTEL_ANONYMIZATION_SECRET": "k"})
    full = hmac.new(b"k", b"alice", hashlib.sha256).hexdigest()
    assert LoggedUsers(hasher)("alice") == full[:16]
    assert LoggedUsers(hasher, width=64)("alice") == full
    assert LoggedUsers(hasher, raw=True)("alice") == "alice"
    assert LoggedUsers(hasher)(None) is None


def test_the_process_rule(monkeypatch):
    monkeypatch.setattr(user_ids, "_RULE", user_ids._RULE)   # restored after the test
    user_ids.use(LoggedUsers(lambda user: f"h({user})", width=64))
    assert logged_user("alice") == "h(alice)"
    user_ids.use(LoggedUsers(lambda user: f"h({user})", raw=True))
    assert logged_user("alice") == "alice"


@pytest.mark.parametrize("error, body_cause", [
    (endpoint_forbidden("alice"), "User alice is not authorized to access this endpoint."),
    (conversation_forbidden("alice", "conv_1", "delete"),
     "User alice does not have permission to delete conversation with ID conv_1"),
])
def test_a_cause_names_its_user_one_way_in_the_body_another_in_the_log(error, body_cause):
    assert error.cause == body_cause and error.detail["cause"] == body_cause
    assert error.user_id == "alice"
    assert error.logged_cause("5c06") == body_cause.replace("alice", "5c06")
    assert error.logged_cause(None) == body_cause


def test_user_ids_are_a_keyed_hmac_sha256():
    hasher = UserHasher({"OTEL_ANONYMIZATION_SECRET": "k"})
    assert hasher.keyed and hasher("alice") == hmac.new(b"k", b"alice", hashlib.sha256).hexdigest()
    assert hasher("alice") == hasher("alice") != hasher("bob")
    unkeyed = UserHasher({})
    assert not unkeyed.keyed and unkeyed("alice") != UserHasher({})("alice")   # a random key per process
    assert "alice" not in unkeyed("alice")
