"""Authorization: roles → actions (LCORE's `authorization.access_rules`).

Everyone has the implicit role `*`. A role's actions are the union of its rules'; a
rule granting `admin` (alone in its rule) grants every action. With no `access_rules`,
everyone may do everything but `admin` and the `*_other_conversations` actions (LCORE
grants those too, so any user reads and deletes any other's conversations; the
gateway does not). Rules, when configured, apply whatever the authentication module
(LCORE ignores them for noop, noop-with-token, k8s and api-key-token, and for jwk-token
without role_rules).

Which action each route needs is declared in `gateway/http/operations.py` (`OPERATIONS`);
the middleware checks it against `Identity.actions`, which `AuthorizingAuthenticator`
fills once per request.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from gateway.config.access import ALL_ACTIONS, DEFAULT_ACTIONS, AccessRule, Action, RoleRule
from gateway.identity import Authenticator, Identity
from gateway.identity.roles import RoleRules

EVERYONE = "*"
# Distinct role sets seen are few (they come from configured rules and keys); the bound
# only keeps a misconfiguration from growing the cache without end.
_CACHED_ROLE_SETS = 4096


class AccessPolicy:
    def __init__(self, access_rules: Sequence[AccessRule]):
        self._configured = bool(access_rules)
        self._by_role: dict[str, set[str]] = {}
        for rule in access_rules:
            self._by_role.setdefault(rule.role, set()).update(rule.actions)
        self._cache: dict[frozenset[str], frozenset[str]] = {}

    def actions(self, roles: frozenset[str]) -> frozenset[str]:
        """What a caller with `roles` (`*` included) may do."""
        if not self._configured:
            return DEFAULT_ACTIONS
        found = self._cache.get(roles)
        if found is None:
            granted = {action for role in roles for action in self._by_role.get(role, ())}
            found = ALL_ACTIONS if Action.ADMIN in granted else frozenset(granted)
            if len(self._cache) >= _CACHED_ROLE_SETS:
                self._cache.clear()
            self._cache[roles] = found
        return found


def may_use_conversation(identity: Identity, owner_id: str, others_action: Action) -> bool:
    """Whether the caller may act on a conversation `owner_id` owns: their own, or
    another user's with `others_action` (`read_`, `query_`, `delete_` or
    `list_other_conversations`)."""
    return owner_id == identity.user_id or others_action in identity.actions


class AuthorizingAuthenticator:
    """A module's identity with its roles (the module's own, e.g. an API key's, and those
    `role_rules` grant over its document, plus `*`) and the actions they grant."""

    def __init__(self, module: Authenticator, role_rules: Sequence[RoleRule], access_rules: Sequence[AccessRule]):
        self._module = module
        self.credential_header = module.credential_header
        self._rules = RoleRules(role_rules)
        self._policy = AccessPolicy(access_rules)

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        identity = await self._module.authenticate(headers, query)
        roles = frozenset(identity.roles) | {EVERYONE}
        if self._rules:
            roles |= self._rules.roles(identity.document)
        return Identity(user_id=identity.user_id, username=identity.username, token=identity.token,
                        roles=tuple(sorted(roles)), skip_userid_check=identity.skip_userid_check,
                        document=identity.document, actions=self._policy.actions(roles))

    async def close(self) -> None:
        await self._module.close()
