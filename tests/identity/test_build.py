"""The authenticator the configuration names: every module the configuration accepts has
one, used as it is without rules and wrapped to resolve roles and actions with them
(the rules themselves: test_authorization.py)."""

from __future__ import annotations

from gateway.config import AuthenticationConfig
from gateway.config.access import AccessRule, Action, RoleRule
from gateway.config.auth import SUPPORTED_AUTH_MODULES
from gateway.identity.authorization import AuthorizingAuthenticator
from gateway.identity.build import _MODULES, authenticator_class, build_authenticator


def test_every_module_the_configuration_accepts_has_an_authenticator():
    assert set(_MODULES) == set(SUPPORTED_AUTH_MODULES)
    # Imported when named: each name leads to its module's authenticator class.
    for module in SUPPORTED_AUTH_MODULES:
        cls = authenticator_class(module)
        assert isinstance(cls, type) and cls.__name__ == _MODULES[module][1]
        assert cls.__module__ == f"gateway.identity.{_MODULES[module][0]}"


def test_without_rules_the_module_is_used_as_it_is():
    module = build_authenticator(AuthenticationConfig(module="noop"))
    assert not isinstance(module, AuthorizingAuthenticator)
    rules = [AccessRule(role="*", actions=[Action.INFO])]
    assert isinstance(build_authenticator(AuthenticationConfig(module="noop"), access_rules=rules),
                      AuthorizingAuthenticator)
    role = RoleRule.model_validate({"jsonpath": "$.groups[*]", "operator": "contains", "value": "admins",
                                    "roles": ["root"]})
    assert isinstance(build_authenticator(AuthenticationConfig(module="noop"), role_rules=[role]),
                      AuthorizingAuthenticator)
