"""Who is calling. An authentication module turns request headers and query into an
`Identity`, or raises the 401 `ApiError` that says why not. `build.py` picks the
configured module and adds what the caller may do: roles from `role_rules` over the
module's identity document, and the actions `authorization.access_rules` grant those
roles (`authorization.py`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol

from gateway.config.access import DEFAULT_ACTIONS


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
    # The actions the caller may perform (LCORE's `authorized_actions`): what
    # `access_rules` grant its roles, or, with no rules, everything but `admin` and the
    # `*_other_conversations` actions. Set by `build_authenticator`, never by a module.
    actions: frozenset[str] = DEFAULT_ACTIONS


class Authenticator(Protocol):
    # The header that carries the caller's credential: a probe without it may pass when
    # `skip_for_health_probes` is set (LCORE).
    credential_header: str

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity: ...

    async def close(self) -> None: ...
