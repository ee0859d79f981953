"""The refusal's audit line (gateway/identity/audit.py): the user a refusal names as log
lines name users, in its field and in the cause."""

from __future__ import annotations

import logging

from gateway import user_ids
from gateway.identity.audit import log_refusal
from gateway.schema.errors import endpoint_forbidden, unauthorized
from gateway.user_ids import LoggedUsers


def test_the_line_names_the_user_by_the_rule(monkeypatch, caplog):
    monkeypatch.setattr(user_ids, "_RULE", LoggedUsers(lambda user: f"hash-of-{user}"))
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        log_refusal("GET /v1/models", "127.0.0.1", "rid-1", "api-key-token", endpoint_forbidden("alice"))
        log_refusal("GET /v1/models", "127.0.0.1", "rid-2", "api-key-token", unauthorized("Invalid API Key"))
    forbidden, missing = caplog.messages
    assert forbidden == ("refused status=403 module=api-key-token route=GET /v1/models client=127.0.0.1 "
                         "request_id=rid-1 user=hash-of-alice "
                         "cause='User hash-of-alice is not authorized to access this endpoint.'")
    assert "alice" not in forbidden.replace("hash-of-alice", "")
    assert missing.endswith("request_id=rid-2 user=None cause='Invalid API Key'")
