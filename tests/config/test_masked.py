"""Every secret of the configuration is masked in `GET /v1/config`: each configured secret
value is absent from the masked dump, and every field of every configuration model whose
name says secret is one `masked()` masks (so a secret added later cannot slip through)."""

from __future__ import annotations

import re
import typing

import orjson
from pydantic import BaseModel

from gateway.config import Configuration, parse_config
from gateway.config.masked import MASK, SECRET_KEYS, masked

SECRETS = {"upstream-api-key-1234", "apikey-0123456789abcdef", "team-key-0123456789", "pg-password-xyz",
           "compaction-secret-0123456789abcdef0123", "search-key-9876", "web-search-key-555",
           "moderation-key-777", "quota-pg-password-abc"}
# Names that look secret but hold none: where a secret is read from, how long one is cached.
NOT_SECRETS = {"key_file", "verified_token_cache_seconds", "k8s_token_path", "keys", "token_floor",
               "password_file", "api_key_file"}


def test_no_configured_secret_survives():
    config = parse_config({
        "name": "g",
        "llama_stack": {"url": "http://u", "api_key": "upstream-api-key-1234"},
        "authentication": {"module": "api-key-token", "api_key_config": {
            "api_key": "apikey-0123456789abcdef", "keys": [{"key": "team-key-0123456789", "user_id": "t"}]}},
        "database": {"postgres": {"host": "h", "db": "d", "user": "u", "password": "pg-password-xyz"}},
        "response_compaction": {"keys": [{"id": "k", "secret": "compaction-secret-0123456789abcdef0123"}]},
        "byok_rag": [{"rag_id": "r", "vector_db_id": "v", "search_url": "http://s", "search_api_key": "search-key-9876"}],
        "web_search": {"url": "http://w", "api_key": "web-search-key-555"},
        "guardrails": {"moderation_url": "http://m", "api_key": "moderation-key-777"},
        "quota_handlers": {"postgres": {"host": "h", "db": "d", "user": "u", "password": "quota-pg-password-abc"},
                           "limiters": []},
    })
    text = orjson.dumps(masked(config)).decode()
    assert not [secret for secret in SECRETS if secret in text]
    assert text.count(MASK) >= len(SECRETS)


def _models(model: type[BaseModel], seen: set[type]) -> typing.Iterator[type[BaseModel]]:
    if model in seen:
        return
    seen.add(model)
    yield model
    for field in model.model_fields.values():
        for inner in _types(field.annotation):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                yield from _models(inner, seen)


def _types(annotation: typing.Any) -> typing.Iterator[typing.Any]:
    yield annotation
    for argument in typing.get_args(annotation):
        yield from _types(argument)


def test_every_field_named_like_a_secret_is_masked():
    looks_secret = re.compile(r"(^|_)(key|secret|password|token)$")
    missed = sorted(f"{model.__name__}.{name}" for model in _models(Configuration, set())
                    for name in model.model_fields
                    if looks_secret.search(name) and name not in SECRET_KEYS and name not in NOT_SECRETS)
    assert missed == []
