"""Role rules, exactly LCORE's semantics: the operator applies to the list of every
JSONPath match (so `equals` a single claim needs `value: [x]`), `negate` inverts."""

from __future__ import annotations

import pytest

from gateway.config.access import RoleRule
from gateway.identity.roles import RoleRules

CLAIMS = {
    "sub": "u-1",
    "email": "alice@redhat.com",
    "email_verified": True,
    "realm_access": {"roles": ["user", "auditor"]},
    "groups": ["/eng/ai", "/ops"],
    "org": {"id": 42, "tier": "gold"},
    "resource_access": {"app": {"roles": ["edit"]}, "other": {"roles": ["view"]}},
}


def grants(jsonpath: str, operator: str, value, negate: bool = False, document=CLAIMS) -> bool:
    rule = RoleRule(jsonpath=jsonpath, operator=operator, value=value, negate=negate, roles=["granted"])
    return RoleRules([rule]).roles(document) == {"granted"}


@pytest.mark.parametrize("jsonpath, operator, value, expected", [
    # equals: the list of matches equals the value
    ("$.email_verified", "equals", [True], True),
    ("$.email_verified", "equals", True, False),           # LCORE's surprise: a list is never `true`
    ("$.realm_access.roles", "equals", [["user", "auditor"]], True),
    ("$.realm_access.roles[*]", "equals", ["user", "auditor"], True),
    ("$.realm_access.roles[*]", "equals", ["auditor", "user"], False),  # order matters
    ("$.missing", "equals", [], True),                    # no match is the empty list
    ("$.org.id", "equals", [42], True),
    # contains: the value is one of the matches
    ("$.realm_access.roles[*]", "contains", "auditor", True),
    ("$.realm_access.roles[*]", "contains", "admin", False),
    ("$.realm_access.roles", "contains", ["user", "auditor"], True),   # the one match is the whole list
    ("$.realm_access.roles", "contains", "user", False),
    ("$.resource_access.*.roles[*]", "contains", "view", True),        # wildcard: matches from every client
    ("$.missing[*]", "contains", "x", False),
    # in: the list of matches is one of the value's elements
    ("$.org.tier", "in", [["gold"], ["silver"]], True),
    ("$.org.tier", "in", ["gold", "silver"], False),      # ["gold"] is not an element of ["gold", "silver"]
    ("$.org.tier", "in", "gold", False),                  # a string cannot hold a list: no match, no error
    ("$.org.tier", "in", 7, False),
    # match: some matched string contains a match of the regex (re.search)
    ("$.email", "match", r"@redhat\.com$", True),
    ("$.email", "match", r"^bob@", False),
    ("$.groups[*]", "match", r"^/eng/", True),
    ("$.org.id", "match", r"42", False),                  # only strings are matched
    ("$.missing", "match", r".*", False),
])
def test_operators(jsonpath, operator, value, expected):
    assert grants(jsonpath, operator, value) is expected
    assert grants(jsonpath, operator, value, negate=True) is (not expected)


def test_negate_grants_when_nothing_matches():
    assert grants("$.groups[*]", "contains", "/admins", negate=True)
    assert grants("$.anything", "contains", "x", negate=True, document=None)  # no document: no claims


def test_every_rule_that_holds_adds_its_roles():
    rules = RoleRules([
        RoleRule(jsonpath="$.realm_access.roles[*]", operator="contains", value="auditor", roles=["auditor", "reader"]),
        RoleRule(jsonpath="$.email", operator="match", value="@redhat.com", roles=["employee"]),
        RoleRule(jsonpath="$.email_verified", operator="equals", value=[False], roles=["unverified"]),
    ])
    assert rules.roles(CLAIMS) == {"auditor", "reader", "employee"}
    assert rules.roles({"email_verified": False}) == {"unverified"}
    assert rules.roles(None) == frozenset()
    assert not RoleRules([]) and rules


def test_regex_is_compiled_once():
    rules = RoleRules([RoleRule(jsonpath="$.email", operator="match", value="@x", roles=["x"])])
    compiled = rules._rules[0].regex
    assert compiled is not None and compiled.pattern == "@x"
    rules.roles({"email": "a@x"})
    assert rules._rules[0].regex is compiled
