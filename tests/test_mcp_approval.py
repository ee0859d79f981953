"""A client's `require_approval` only tightens the operator's (pure)."""

from __future__ import annotations

import pytest

from gateway.engine.mcp_tools import needs_approval
from gateway.mcp_approval import tighter

FILTER = {"always": ["delete"], "never": ["read", "list"]}
NAMES = ("delete", "read", "list", "write")


@pytest.mark.parametrize("operator, client, merged", [
    ("always", "never", "always"),
    ("always", None, "always"),
    ("always", {"always": [], "never": ["delete"]}, "always"),
    ("never", "always", "always"),
    ("never", None, "never"),
    ("never", FILTER, FILTER),
    (FILTER, "never", FILTER),
    (FILTER, None, FILTER),
    (FILTER, "always", "always"),
    # A client's `never` list cannot take a tool out of the operator's `always`, nor
    # exempt one the operator did not.
    (FILTER, {"always": [], "never": ["delete", "read", "write"]}, {"always": ["delete"], "never": ["read"]}),
    (FILTER, {"always": ["read"], "never": ["list"]}, {"always": ["delete", "read"], "never": ["list"]}),
    # OpenAI's form reads alike.
    (FILTER, {"always": {"tool_names": ["list"]}, "never": {"tool_names": ["read", "delete"]}},
     {"always": ["delete", "list"], "never": ["read"]}),
])
def test_merged_policy(operator, client, merged):
    assert tighter(operator, client) == merged


@pytest.mark.parametrize("operator", ["always", "never", FILTER])
@pytest.mark.parametrize("client", [None, "always", "never", FILTER, {"always": ["read"], "never": ["delete", "write"]},
                                    {"always": [], "never": list(NAMES)}])
def test_a_tool_needs_approval_when_either_policy_requires_it(operator, client):
    merged = {"require_approval": tighter(operator, client)}
    for name in NAMES:
        either = needs_approval({"require_approval": operator}, name) or (
            client is not None and needs_approval({"require_approval": client}, name))
        assert needs_approval(merged, name) == either, name


def test_an_unreadable_policy_is_the_strictest():
    assert tighter("never", 42) == "always"
