"""Authorization through `gateway serve`: api-key-token keys with roles, LCORE's
`access_rules`, every route × every role (allowed or LCORE's 403), `model_override`, and
other users' conversations and responses."""

from __future__ import annotations

import pytest

from gateway.http.operations import AUTHENTICATED_ONLY, OPERATIONS
from tests.support.gateway_db import GatewayDb

# user -> (key, roles)
KEYS = {
    "root": ("root-key-0001", ["root"]),
    "alice": ("alice-key-0001", ["chat"]),
    "bob": ("bob-key-0001", ["chat"]),
    "carol": ("carol-key-0001", ["viewer"]),
    "dave": ("dave-key-0001", ["chat", "override"]),
    "eve": ("eve-key-0001", ["chat", "support"]),
    "frank": ("frank-key-0001", ["chat", "auditor"]),
    "nobody": ("nobody-key-0001", []),
}
ACCESS_RULES = [
    {"role": "*", "actions": ["info"]},                       # everyone's implicit role
    {"role": "chat", "actions": ["responses"]},
    {"role": "viewer", "actions": ["get_models"]},
    {"role": "override", "actions": ["model_override"]},
    {"role": "support", "actions": ["query_other_conversations"]},
    {"role": "auditor", "actions": ["read_other_conversations", "list_other_conversations"]},
    {"role": "root", "actions": ["admin"]},
]
# What each user may do, written out (not computed from the rules under test).
ALLOWED = {
    "root": {"responses", "get_models", "info", "admin", "query", "streaming_query", "get_metrics",
             "list_conversations", "get_conversation", "update_conversation", "delete_conversation", "feedback",
             "rlsapi_v1_infer", "get_tools", "get_shields", "list_providers", "get_provider", "get_config"},
    "alice": {"responses", "info"},
    "bob": {"responses", "info"},
    "carol": {"get_models", "info"},
    "dave": {"responses", "info"},
    "eve": {"responses", "info"},
    "frank": {"responses", "info"},
    "nobody": {"info"},
}
# Every route: (method, path, body) and the status an allowed caller gets.
ROUTES = {
    ("post", "/v1/responses"): ({"input": "hello", "tool_choice": "none"}, 200),
    ("get", "/v1/responses"): (None, 501),   # listing exists in engine mode; this gateway forwards
    ("post", "/v1/responses/compact"): ({"model": "scripted-chat", "input": "hi"}, 200),   # on by default
    ("get", "/v1/responses/{response_id}"): (None, 404),
    ("delete", "/v1/responses/{response_id}"): (None, 404),
    ("get", "/v1/responses/{response_id}/input_items"): (None, 404),
    ("post", "/v1/responses/{response_id}/cancel"): (None, 404),
    ("get", "/v1/models"): (None, 200),
    ("get", "/v1/info"): (None, 200),
    ("get", "/liveness"): (None, 200),
    ("get", "/readiness"): (None, 200),
    ("get", "/metrics"): (None, 200),
    ("get", "/openapi.json"): (None, 200),
    ("get", "/"): (None, 200),
    ("post", "/authorized"): (None, 200),
    # This gateway has no limiters: the quota API answers, with nothing to change.
    ("get", "/v1/quotas"): (None, 200),
    ("get", "/v1/quotas/usage"): (None, 200),
    ("get", "/v1/quotas/cluster"): (None, 200),
    ("put", "/v1/quotas/cluster"): ({"limiters": {"daily": 5}}, 422),
    ("post", "/v1/quotas/cluster/increments"): ({"limiters": {"daily": 5}}, 400),   # no Idempotency-Key
    ("get", "/v1/quotas/users/{user_id}"): (None, 200),
    ("put", "/v1/quotas/users/{user_id}"): ({"limiters": {"daily": 5}}, 422),
    ("post", "/v1/quotas/users/{user_id}/increments"): ({"limiters": {"daily": 5}}, 400),
    ("post", "/v1/query"): ({"query": "hello", "no_tools": True}, 200),
    ("post", "/v1/streaming_query"): ({"query": "hello", "no_tools": True}, 200),
    ("post", "/v1/infer"): ({"question": "hello"}, 200),
    ("get", "/v1/tools"): (None, 200),
    ("get", "/v1/mcp-auth/client-options"): (None, 200),
    ("get", "/v1/shields"): (None, 200),
    # The scripted upstream has no providers API: 501 for whoever may ask.
    ("get", "/v1/providers"): (None, 501),
    ("get", "/v1/providers/{provider_id}"): (None, 501),
    ("get", "/v1/config"): (None, 200),
    ("post", "/v1/streaming_query/interrupt"): ({"request_id": "00000000-0000-4000-8000-000000000000"}, 404),
    ("get", "/v1/conversations"): (None, 200),
    ("get", "/v1/conversations/{conversation_id}"): (None, 404),
    ("put", "/v1/conversations/{conversation_id}"): ({"topic_summary": "renamed"}, 404),
    ("delete", "/v1/conversations/{conversation_id}"): (None, 200),   # always: `deleted: false`
    # OpenAI's Conversations API on the same paths (issue 23).
    ("post", "/v1/conversations"): ({"metadata": {"k": "v"}}, 200),
    ("post", "/v1/conversations/{conversation_id}"): ({"metadata": {"k": "v"}}, 404),
    ("get", "/v1/conversations/{conversation_id}/items"): (None, 404),
    ("post", "/v1/conversations/{conversation_id}/items"): ({"items": [{"role": "user", "content": "x"}]}, 404),
    ("get", "/v1/conversations/{conversation_id}/items/{item_id}"): (None, 404),
    ("delete", "/v1/conversations/{conversation_id}/items/{item_id}"): (None, 404),
    # No `conversation_cache` on this gateway: LCORE's 500.
    ("get", "/v2/conversations"): (None, 500),
    ("get", "/v2/conversations/{conversation_id}"): (None, 500),
    ("put", "/v2/conversations/{conversation_id}"): ({"topic_summary": "renamed"}, 500),
    ("delete", "/v2/conversations/{conversation_id}"): (None, 500),
    # Feedback is disabled on this gateway, and stays so (the switch is set to what it is).
    ("post", "/v1/feedback"): ({"conversation_id": "0" * 48, "user_question": "q", "llm_response": "a",
                                "sentiment": 1}, 403),
    ("get", "/v1/feedback/status"): (None, 200),
    ("put", "/v1/feedback/status"): ({"status": False}, 200),
}
OPENAI_PATHS = ("/v1/responses", "/v1/models", "/v1/conversations")
UNKNOWN_CONVERSATION = "0" * 48


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user][0]}"}


@pytest.fixture(scope="module")
def rbac(gateway_factory, upstream):
    return gateway_factory(upstream.url, authentication={"module": "api-key-token", "api_key_config": {
        "keys": [{"key": key, "user_id": user, "roles": roles} for user, (key, roles) in KEYS.items()]}},
        authorization={"access_rules": ACCESS_RULES})


def test_the_matrix_covers_every_route():
    assert set(ROUTES) == {(operation.method, operation.path) for operation in OPERATIONS}


def writes(upstream) -> list[dict]:
    return [request for request in upstream.requests() if request["method"] != "GET"]


@pytest.mark.parametrize("user", sorted(KEYS))
@pytest.mark.parametrize("route", sorted(ROUTES), ids=lambda route: f"{route[0].upper()} {route[1]}")
def test_rbac_matrix(rbac, upstream, user, route):
    operation = next(op for op in OPERATIONS if (op.method, op.path) == route)
    body, allowed_status = ROUTES[route]
    path = route[1].replace("{response_id}", "resp_unknown").replace("{user_id}", "alice") \
        .replace("{conversation_id}", UNKNOWN_CONVERSATION).replace("{item_id}", "msg_unknown").replace("{provider_id}", "scripted")
    upstream.clear()
    reply = rbac.request(route[0].upper(), path, body, headers=auth(user))
    allowed = operation.public or operation.action == AUTHENTICATED_ONLY or operation.action in ALLOWED[user]
    if allowed:
        assert reply.status == allowed_status, reply.body
        return
    assert reply.status == 403, reply.body
    data = reply.json()
    assert data["detail"] == {"response": "User does not have permission to access this endpoint",
                              "cause": f"User {user} is not authorized to access this endpoint."}
    if path.startswith(OPENAI_PATHS):
        assert data["error"]["type"] == "permission_error" and data["error"]["code"] == "endpoint_forbidden"
    else:
        assert set(data) == {"detail"}
    assert writes(upstream) == []  # refused before anything is sent upstream


def test_refusals_are_audited(rbac):
    rbac.get("/v1/models", headers=auth("alice"))
    assert "refused status=403 module=api-key-token route=GET /v1/models" in rbac.log()
    assert KEYS["alice"][0] not in rbac.log()


def test_authorized_says_who_the_key_is(rbac):
    assert rbac.post("/authorized", headers=auth("nobody")).ok() == {
        "user_id": "nobody", "username": "nobody", "skip_userid_check": False}
    reply = rbac.post("/authorized")
    assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"


def automatic_model(rbac, upstream) -> str:
    upstream.clear()
    rbac.post("/v1/responses", {"input": "which model?", "tool_choice": "none"}, headers=auth("alice")).ok()
    return upstream.last()["body"]["model"]


def another_llm(gateway, chosen: str) -> str:
    return next(model["id"] for model in gateway.get("/v1/models?model_type=llm", headers=auth("root")).ok()["data"]
                if model["id"] != chosen)


def test_naming_another_model_needs_model_override(rbac, upstream):
    chosen = automatic_model(rbac, upstream)
    other = another_llm(rbac, chosen)
    db = GatewayDb.of(rbac)
    db.flush(headers=auth("root"))
    before = db.counts(user_id="bob")
    for model in (other, "nowhere/unknown-model"):
        upstream.clear()
        reply = rbac.post("/v1/responses", {"input": "x", "model": model}, headers=auth("bob"))
        assert reply.status == 403, reply.body
        assert reply.json()["detail"] == {
            "response": "This instance does not permit overriding model/provider in the query request "
                        "(missing permission: model_override). Please remove the model and provider fields "
                        "from your request.",
            "cause": "User lacks model_override permission required to override model/provider."}
        assert reply.json()["error"]["code"] == "model_override_forbidden"
        streamed = rbac.post("/v1/responses", {"input": "x", "model": model, "stream": True}, headers=auth("bob"))
        assert streamed.status == 403 and streamed.json()["detail"] == reply.json()["detail"]
        assert writes(upstream) == []  # no conversation created, nothing sent
    db.flush(headers=auth("root"))
    assert db.counts(user_id="bob") == before
    # Naming the model the gateway would choose anyway is not an override (SDKs always send one).
    assert rbac.post("/v1/responses", {"input": "x", "model": chosen, "tool_choice": "none"},
                     headers=auth("bob")).status == 200
    # With the action: any model, and an unknown one is the usual 404.
    upstream.clear()
    rbac.post("/v1/responses", {"input": "x", "model": other, "tool_choice": "none"}, headers=auth("dave")).ok()
    assert upstream.last()["body"]["model"] == other
    assert rbac.post("/v1/responses", {"input": "x", "model": "nowhere/unknown-model"},
                     headers=auth("dave")).status == 404


def test_continuing_a_conversation_with_its_own_model_is_not_an_override(rbac, upstream):
    chosen = automatic_model(rbac, upstream)
    first = rbac.post("/v1/responses", {"input": "one", "tool_choice": "none"}, headers=auth("alice")).ok()
    second = rbac.post("/v1/responses", {"input": "two", "model": chosen, "conversation": first["conversation"],
                                         "tool_choice": "none"}, headers=auth("alice"))
    assert second.status == 200 and second.json()["conversation"] == first["conversation"]


def test_other_users_conversation_needs_query_other_conversations(rbac, upstream):
    mine = rbac.post("/v1/responses", {"input": "alice's secret", "tool_choice": "none"}, headers=auth("alice")).ok()
    conversation = mine["conversation"]
    upstream.clear()
    for user in ("bob", "frank"):  # frank may read others' conversations, not continue them
        reply = rbac.post("/v1/responses", {"input": "let me in", "conversation": conversation}, headers=auth(user))
        assert reply.status == 403 and reply.json()["detail"] == {
            "response": "User does not have permission to perform this action",
            "cause": f"User {user} does not have permission to read conversation with ID {conversation}"}
    assert writes(upstream) == []
    # 403 for a foreign conversation, 404 for an unknown one (LCORE's order).
    unknown = rbac.post("/v1/responses", {"input": "x", "conversation": "conv_" + "0" * 48}, headers=auth("bob"))
    assert unknown.status == 404
    # With the action (eve) or admin (root), the turn continues alice's conversation.
    for user in ("eve", "root"):
        upstream.clear()
        reply = rbac.post("/v1/responses", {"input": f"{user} here", "conversation": conversation,
                                            "tool_choice": "none"}, headers=auth(user))
        assert reply.status == 200, reply.body
        assert reply.json()["conversation"] == conversation
        assert upstream.last()["body"]["conversation"] == conversation
    # The conversation stays alice's.
    db = GatewayDb.of(rbac)
    db.flush(headers=auth("root"))
    assert db.conversation(conversation)["user_id"] == "alice"


def test_other_users_responses_are_404_for_everyone_but_the_owner(rbac, upstream):
    mine = rbac.post("/v1/responses", {"input": "alice's answer", "tool_choice": "none"}, headers=auth("alice")).ok()
    GatewayDb.of(rbac).wait_for_turn(mine["id"])
    for user in ("bob", "eve", "root"):  # eve and root may continue alice's conversations, not probe ids
        chained = rbac.post("/v1/responses", {"input": "x", "previous_response_id": mine["id"]}, headers=auth(user))
        assert chained.status == 404 and chained.json()["detail"]["response"] == "Response not found", user
        for method, path in (("GET", f"/v1/responses/{mine['id']}"),
                             ("GET", f"/v1/responses/{mine['id']}/input_items"),
                             ("DELETE", f"/v1/responses/{mine['id']}")):
            assert rbac.request(method, path, headers=auth(user)).status == 404, (user, method, path)
    assert rbac.get(f"/v1/responses/{mine['id']}", headers=auth("alice")).ok()["id"] == mine["id"]
    assert rbac.delete(f"/v1/responses/{mine['id']}", headers=auth("alice")).status == 200


def test_without_access_rules_nobody_has_other_users_conversations(gateway_factory, upstream):
    """Unlike LCORE (whose noop-family modules grant every `*_other_conversations`
    action), with no `access_rules` one user never continues another's conversation."""
    plain = gateway_factory(upstream.url, authentication={"module": "api-key-token", "api_key_config": {
        "keys": [{"key": KEYS["root"][0], "user_id": "root", "roles": ["root"]},
                 {"key": KEYS["alice"][0], "user_id": "alice"}]}})
    upstream.clear()
    mine = plain.post("/v1/responses", {"input": "mine", "tool_choice": "none"}, headers=auth("alice")).ok()
    other = another_llm(plain, upstream.last()["body"]["model"])
    reply = plain.post("/v1/responses", {"input": "x", "conversation": mine["conversation"]}, headers=auth("root"))
    assert reply.status == 403
    # Everything else is open, naming a model included.
    assert plain.get("/v1/models", headers=auth("root")).status == 200
    assert plain.post("/v1/responses", {"input": "x", "model": other, "tool_choice": "none"},
                      headers=auth("alice")).status == 200


def test_access_rules_apply_under_noop_too(gateway_factory, upstream):
    """LCORE ignores access_rules under noop; the gateway enforces them for every module."""
    ruled = gateway_factory(upstream.url, authorization={"access_rules": [{"role": "*", "actions": ["get_models"]}]})
    assert ruled.get("/v1/models?user_id=u1").status == 200
    reply = ruled.post("/v1/responses?user_id=u1", {"input": "x"})
    assert reply.status == 403 and reply.json()["detail"]["cause"] == "User u1 is not authorized to access this endpoint."
    assert ruled.post("/authorized?user_id=u1").ok() == {"user_id": "u1", "username": "lightspeed-user",
                                                         "skip_userid_check": True}


def test_role_rules_apply_to_the_modules_identity_document(gateway_factory, upstream):
    """role_rules are evaluated centrally over any module's identity document; an API
    key's is its user_id, username and roles."""
    ruled = gateway_factory(upstream.url, authentication={
        "module": "api-key-token",
        "api_key_config": {"keys": [{"key": "ops-key-0001", "user_id": "ops-1", "username": "ops-anna"},
                                    {"key": "dev-key-0001", "user_id": "dev-1", "username": "dev-ben"}]},
        "jwk_config": {"jwt_configuration": {"role_rules": [
            {"jsonpath": "$.username", "operator": "match", "value": "^ops-", "roles": ["ops"]},
            {"jsonpath": "$.username", "operator": "equals", "value": ["ops-anna"], "negate": True,
             "roles": ["not-anna"]}]}}},
        authorization={"access_rules": [{"role": "ops", "actions": ["admin"]},
                                        {"role": "not-anna", "actions": ["info"]}]})
    ops, dev = {"Authorization": "Bearer ops-key-0001"}, {"Authorization": "Bearer dev-key-0001"}
    assert ruled.get("/v1/models", headers=ops).status == 200
    assert ruled.get("/v1/models", headers=dev).status == 403
    assert ruled.get("/v1/info", headers=dev).status == 200   # the negated rule holds for dev-ben


def test_openai_sdk_clients_with_a_key(rbac):
    import openai

    chat = rbac.client(api_key=KEYS["alice"][0])
    assert chat.responses.create(input="hello from the SDK", tool_choice="none").output_text
    with pytest.raises(openai.PermissionDeniedError) as denied:
        chat.models.list()
    assert denied.value.status_code == 403 and denied.value.body["code"] == "endpoint_forbidden"
    with pytest.raises(openai.AuthenticationError):
        rbac.client(api_key="not-a-key").models.list()
    assert [model.id for model in rbac.client(api_key=KEYS["carol"][0]).models.list()]
