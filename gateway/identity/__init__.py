"""Who is calling. An authentication module turns request headers and query into an
`Identity`, or raises the 401 `ApiError` that says why not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from gateway.config import AuthenticationConfig


@dataclass(frozen=True)
class Identity:
    user_id: str
    username: str
    # The end user's own bearer token, which `kubernetes` MCP headers pass on (tools.py);
    # empty when the module has none of the user's: never a proxy's token or an API key.
    token: str = ""
    roles: tuple[str, ...] = ()
    # LCORE's flag: modules without a verified user (noop family) skip per-user checks
    # in LCORE; the gateway still scopes conversations to user_id (stricter than LCORE).
    skip_userid_check: bool = False
    # What `role_rules` are evaluated against: the module's identity document (JWT claims,
    # the TokenReview user with its groups, the rh-identity JSON, the forwarded user).
    document: Mapping[str, Any] | None = None


class Authenticator(Protocol):
    # The header that carries the caller's credential: a probe without it may pass when
    # `skip_for_health_probes` is set (LCORE).
    credential_header: str

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity: ...

    async def close(self) -> None: ...


def build_authenticator(config: AuthenticationConfig) -> Authenticator:
    from gateway.identity.jwk_token import JwkTokenAuthenticator
    from gateway.identity.k8s import K8sAuthenticator
    from gateway.identity.noop import NoopAuthenticator
    from gateway.identity.noop_with_token import NoopWithTokenAuthenticator
    from gateway.identity.rh_identity import RhIdentityAuthenticator
    from gateway.identity.trusted_proxy import TrustedProxyAuthenticator

    modules = {"noop": NoopAuthenticator, "noop-with-token": NoopWithTokenAuthenticator,
               "jwk-token": JwkTokenAuthenticator, "k8s": K8sAuthenticator, "rh-identity": RhIdentityAuthenticator,
               "trusted-proxy": TrustedProxyAuthenticator}
    return modules[config.module](config)
