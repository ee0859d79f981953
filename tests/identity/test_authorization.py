"""Roles → actions: the implicit `*` role, the union of a role's rules, `admin` granting
everything, and the default without rules (no `*_other_conversations`, unlike LCORE)."""

from __future__ import annotations

from gateway.config.access import (ALL_ACTIONS, DEFAULT_ACTIONS, OTHERS_CONVERSATIONS_ACTIONS, AccessRule, Action,
                                   RoleRule)
from gateway.identity import Identity
from gateway.identity.authorization import AccessPolicy, AuthorizingAuthenticator, may_use_conversation

RULES = [AccessRule(role="*", actions=[Action.INFO]),
         AccessRule(role="chat", actions=[Action.RESPONSES]),
         AccessRule(role="chat", actions=[Action.GET_MODELS]),
         AccessRule(role="root", actions=[Action.ADMIN])]


def test_no_rules_everything_but_admin_and_other_users_conversations():
    actions = AccessPolicy([]).actions(frozenset({"*", "anything"}))
    assert actions == DEFAULT_ACTIONS
    assert Action.ADMIN not in actions and not actions & OTHERS_CONVERSATIONS_ACTIONS
    assert {Action.RESPONSES, Action.MODEL_OVERRIDE, Action.INFO} <= actions


def test_roles_union_and_implicit_everyone():
    policy = AccessPolicy(RULES)
    assert policy.actions(frozenset({"*"})) == {Action.INFO}
    assert policy.actions(frozenset({"*", "chat"})) == {Action.INFO, Action.RESPONSES, Action.GET_MODELS}
    assert policy.actions(frozenset({"*", "unknown"})) == {Action.INFO}


def test_admin_grants_every_action():
    assert AccessPolicy(RULES).actions(frozenset({"*", "root"})) == ALL_ACTIONS


class Fixed:
    credential_header = "Authorization"

    def __init__(self, identity: Identity):
        self.identity = identity

    async def authenticate(self, headers, query):
        return self.identity


async def test_roles_from_the_module_and_from_rules_over_its_document():
    module = Fixed(Identity(user_id="u", username="n", token="t", roles=("chat",),
                            document={"groups": ["admins"]}))
    rules = [RoleRule(jsonpath="$.groups[*]", operator="contains", value="admins", roles=["root"])]
    identity = await AuthorizingAuthenticator(module, rules, RULES).authenticate({}, {})
    assert set(identity.roles) == {"*", "chat", "root"} and identity.actions == ALL_ACTIONS
    assert (identity.user_id, identity.username, identity.token) == ("u", "n", "t")
    plain = await AuthorizingAuthenticator(Fixed(Identity(user_id="v", username="v")), rules, RULES).authenticate({}, {})
    assert plain.roles == ("*",) and plain.actions == {Action.INFO}


def test_other_users_conversations_need_the_named_action():
    default = Identity(user_id="bob", username="bob")
    assert may_use_conversation(default, "bob", Action.QUERY_OTHERS_CONVERSATIONS)
    assert not any(may_use_conversation(default, "alice", action) for action in OTHERS_CONVERSATIONS_ACTIONS)
    reader = Identity(user_id="bob", username="bob", actions=frozenset({Action.READ_OTHERS_CONVERSATIONS}))
    assert may_use_conversation(reader, "alice", Action.READ_OTHERS_CONVERSATIONS)
    assert not may_use_conversation(reader, "alice", Action.QUERY_OTHERS_CONVERSATIONS)
