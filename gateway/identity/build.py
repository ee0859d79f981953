"""The authenticator the configuration names: its module, with role and access rules
when there are any.

Each module is imported when a configuration names it: `jwk-token` loads PyJWT and
`cryptography` (~8 MiB of resident memory), which a gateway on another module never
uses (docs/architecture.md, "Start-up memory"; `tests/test_startup_imports.py`)."""

from __future__ import annotations

import importlib
from typing import Callable, Sequence

from gateway.config import AuthenticationConfig
from gateway.config.access import AccessRule, RoleRule
from gateway.identity import Authenticator
from gateway.identity.authorization import AuthorizingAuthenticator

# `authentication.module` -> (the module under gateway.identity, its authenticator class).
_MODULES: dict[str, tuple[str, str]] = {
    "noop": ("noop", "NoopAuthenticator"), "noop-with-token": ("noop_with_token", "NoopWithTokenAuthenticator"),
    "api-key-token": ("api_key", "ApiKeyAuthenticator"), "jwk-token": ("jwk_token", "JwkTokenAuthenticator"),
    "k8s": ("k8s", "K8sAuthenticator"), "rh-identity": ("rh_identity", "RhIdentityAuthenticator"),
    "trusted-proxy": ("trusted_proxy", "TrustedProxyAuthenticator")}


def authenticator_class(module: str) -> Callable[[AuthenticationConfig], Authenticator]:
    """The class of `authentication.module`'s authenticator, its module imported now."""
    name, cls = _MODULES[module]
    found: Callable[[AuthenticationConfig], Authenticator] = getattr(
        importlib.import_module(f"gateway.identity.{name}"), cls)
    return found


def build_authenticator(config: AuthenticationConfig, role_rules: Sequence[RoleRule] = (),
                        access_rules: Sequence[AccessRule] = ()) -> Authenticator:
    module = authenticator_class(config.module)(config)
    if not role_rules and not access_rules:
        return module  # everyone has the default actions: nothing to resolve per request
    return AuthorizingAuthenticator(module, role_rules, access_rules)
