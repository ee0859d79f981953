"""`conversation_cache` and `user_data_collection`: typed, every LCORE sub-key accepted."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config

MINIMAL = {"name": "x", "llama_stack": {"url": "http://u"}}


def test_lcores_keys_are_accepted():
    config = parse_config({**MINIMAL, "conversation_cache": {
        "type": "postgres", "memory": {"max_entries": 10}, "sqlite": {"db_path": "/tmp/c.db"},
        "postgres": {"host": "h", "port": 5432, "db": "d", "user": "u", "password": "p", "namespace": "n",
                     "ssl_mode": "prefer", "gss_encmode": "disable", "ca_cert_path": "/ca"}},
        "user_data_collection": {"feedback_enabled": True, "feedback_storage": "/tmp/f",
                                 "transcripts_enabled": True, "transcripts_storage": "/tmp/t"}})
    assert config.conversation_cache.configured and config.user_data_collection.feedback_enabled
    assert config.warnings() == []
    assert not parse_config(MINIMAL).conversation_cache.configured
    assert not parse_config({**MINIMAL, "conversation_cache": None}).conversation_cache.configured


@pytest.mark.parametrize("section, message", [
    ({"user_data_collection": {"feedback_enabled": True}}, "feedback_storage is required"),
    ({"user_data_collection": {"transcripts_enabled": True}}, "transcripts_storage is required"),
    ({"user_data_collection": {"feedback": True}}, "user_data_collection.feedback: unknown key"),
    ({"conversation_cache": {"type": "redis"}}, "conversation_cache.type"),
    ({"conversation_cache": {"postgres": {"hots": "h"}}}, "conversation_cache.postgres.hots: unknown key"),
])
def test_mistakes_fail_start_up_naming_the_key(section, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({**MINIMAL, **section})


def test_conversation_expiry_is_off_by_default_and_checked():
    assert parse_config(MINIMAL).conversation_expiry.idle_ttl_seconds is None
    assert parse_config({**MINIMAL, "conversation_expiry": {"idle_ttl_seconds": 60}}).conversation_expiry \
        .sweep_interval_seconds == 60
    with pytest.raises(ConfigError, match="conversation_expiry.idle_ttl_seconds"):
        parse_config({**MINIMAL, "conversation_expiry": {"idle_ttl_seconds": 0}})
