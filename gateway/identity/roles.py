"""Role rules: LCORE's `jwt_configuration.role_rules`, applied to any module's identity
document (JWT claims, the TokenReview user, the rh-identity JSON, the forwarded user).

Exactly LCORE's semantics, surprising parts included: the operator is applied to the
list of every value the JSONPath matches, not to each value, so `equals` needs
`value: [true]` to match a single `true`; `contains` asks whether `value` is one of the
matches; `in` whether the list of matches is an element of `value`; `match` whether
any matched string contains a match of the regular expression (`re.search`). `negate`
inverts the result. JSONPaths and regexes are compiled once, at start-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from gateway.config.access import RoleRule


def _equals(matches: list[Any], value: Any, regex: re.Pattern[str] | None) -> bool:
    return bool(matches == value)


def _contains(matches: list[Any], value: Any, regex: re.Pattern[str] | None) -> bool:
    return value in matches


def _in(matches: list[Any], value: Any, regex: re.Pattern[str] | None) -> bool:
    try:
        return matches in value
    except TypeError:  # a `value` that cannot hold a list (a string, a number): no match
        return False


def _match(matches: list[Any], value: Any, regex: re.Pattern[str] | None) -> bool:
    assert regex is not None
    return any(isinstance(item, str) and regex.search(item) is not None for item in matches)


_OPERATORS: dict[str, Callable[[list[Any], Any, re.Pattern[str] | None], bool]] = {
    "equals": _equals, "contains": _contains, "in": _in, "match": _match}


@dataclass(frozen=True)
class _Compiled:
    path: Any                      # a jsonpath_ng expression
    holds: Callable[[list[Any], Any, re.Pattern[str] | None], bool]
    value: Any
    regex: re.Pattern[str] | None
    negate: bool
    roles: frozenset[str]


def _compile(rule: RoleRule) -> _Compiled:
    from jsonpath_ng.parser import parse  # only a configuration with role rules loads it (start-up memory)

    return _Compiled(parse(rule.jsonpath), _OPERATORS[rule.operator], rule.value,
                     re.compile(rule.value) if rule.operator == "match" else None, rule.negate, frozenset(rule.roles))


class RoleRules:
    def __init__(self, rules: Sequence[RoleRule]):
        self._rules = [_compile(rule) for rule in rules]

    def __bool__(self) -> bool:
        return bool(self._rules)

    def roles(self, document: Mapping[str, Any] | None) -> frozenset[str]:
        """The roles every rule that holds for `document` grants (none for no document,
        as LCORE gives a guest no claims; a negated rule may still hold)."""
        found: set[str] = set()
        for rule in self._rules:
            matches = [match.value for match in rule.path.find(document if document is not None else {})]
            if rule.holds(matches, rule.value, rule.regex) != rule.negate:
                found |= rule.roles
        return frozenset(found)
