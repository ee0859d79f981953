"""Whose balance `/v1/infer` spends (LCORE's `_resolve_quota_subject`): none without
`rlsapi_v1.quota_subject`; the user id; or the rh-identity document's `org_id` or system
`cn`, falling back to the user id when the module or the document has none.
(The endpoint: tests/e2e/test_infer.py.)"""

from __future__ import annotations

from typing import Any

from gateway.config import parse_config
from gateway.http.infer import quota_subject
from gateway.identity import Identity

SYSTEM = {"identity": {"type": "System", "org_id": "org-7", "system": {"cn": "host-cn"}}}


def subject(kind: str | None, module: str = "rh-identity", document: Any = SYSTEM) -> str | None:
    config = parse_config({"name": "x", "llama_stack": {"url": "http://u"},
                           "authentication": {"module": module},
                           "rlsapi_v1": {} if kind is None else {"quota_subject": kind}})
    return quota_subject(config, Identity(user_id="u-1", username="ann", document=document))


def test_the_subject_the_configuration_names():
    assert subject(None) is None
    assert subject("user_id") == "u-1"
    assert subject("org_id") == "org-7"
    assert subject("system_id") == "host-cn"


def test_the_user_id_when_the_identity_lacks_it():
    assert subject("org_id", module="noop") == "u-1"   # another module's document is not read
    assert subject("org_id", document={"identity": {"type": "User"}}) == "u-1"
    assert subject("system_id", document={"identity": {"type": "User", "org_id": "o"}}) == "u-1"
    assert subject("org_id", document={"identity": {"org_id": ""}}) == "u-1"
    assert subject("org_id", document=None) == "u-1"
