"""The authenticator the configuration names: its module, with role and access rules
when there are any."""

from __future__ import annotations

from typing import Callable, Sequence

from gateway.config import AuthenticationConfig
from gateway.config.access import AccessRule, RoleRule
from gateway.identity import Authenticator
from gateway.identity.api_key import ApiKeyAuthenticator
from gateway.identity.authorization import AuthorizingAuthenticator
from gateway.identity.jwk_token import JwkTokenAuthenticator
from gateway.identity.k8s import K8sAuthenticator
from gateway.identity.noop import NoopAuthenticator
from gateway.identity.noop_with_token import NoopWithTokenAuthenticator
from gateway.identity.rh_identity import RhIdentityAuthenticator
from gateway.identity.trusted_proxy import TrustedProxyAuthenticator

_MODULES: dict[str, Callable[[AuthenticationConfig], Authenticator]] = {"noop": NoopAuthenticator, "noop-with-token": NoopWithTokenAuthenticator,
            "api-key-token": ApiKeyAuthenticator, "jwk-token": JwkTokenAuthenticator, "k8s": K8sAuthenticator,
            "rh-identity": RhIdentityAuthenticator, "trusted-proxy": TrustedProxyAuthenticator}


def build_authenticator(config: AuthenticationConfig, role_rules: Sequence[RoleRule] = (),
                        access_rules: Sequence[AccessRule] = ()) -> Authenticator:
    module = _MODULES[config.module](config)
    if not role_rules and not access_rules:
        return module  # everyone has the default actions: nothing to resolve per request
    return AuthorizingAuthenticator(module, role_rules, access_rules)
