"""`k8s` and `trusted-proxy` through `gateway serve`, against a fake Kubernetes API on
loopback over HTTPS with a CA made for the test (so `k8s_ca_cert_path` is exercised),
answering `TokenReview` and `SubjectAccessReview`."""

from __future__ import annotations

import http.client
import json
import time

import pytest

from tests.support.auth_peers import FakeKubeApi, TestCa, owner_of
from tests.support.gateway_db import GatewayDb
from tests.support.gateway_proc import HttpReply

KUBE_MCP = "http://127.0.0.1:9/kube"
FORBIDDEN = "User does not have permission to access this endpoint"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    api = FakeKubeApi(TestCa(tmp_path_factory.mktemp("ca")), users={
        "alice-token": {"username": "alice", "uid": "uid-alice", "groups": ["devs", "system:authenticated"]},
        "bob-token": {"username": "bob", "uid": "uid-bob", "groups": ["system:authenticated"]},
        "proxy-token": {"username": "system:serviceaccount:ai:proxy", "uid": "uid-proxy"},
        "other-proxy-token": {"username": "system:serviceaccount:ai:other", "uid": "uid-other"},
        "kubeadmin-token": {"username": "kube:admin", "groups": ["system:cluster-admins"]},
    }, allowed={"alice", "kube:admin"})
    yield api
    api.close()


@pytest.fixture(scope="module")
def sa_token(tmp_path_factory):
    path = tmp_path_factory.mktemp("sa") / "token"
    path.write_text("gateway-sa-token-1\n")
    return path


def kube_settings(kube: FakeKubeApi, sa_token, **extra) -> dict:
    return {"k8s_cluster_api": kube.url, "k8s_ca_cert_path": str(kube.ca.ca_path),
            "k8s_token_path": str(sa_token), "k8s_review_cache_seconds": 0.5, **extra}


@pytest.fixture(scope="module")
def k8s_gateway(gateway_factory, upstream, kube, sa_token):
    return gateway_factory(upstream.url, authentication={"module": "k8s", **kube_settings(kube, sa_token)},
                           mcp_servers=[{"name": "kube", "url": KUBE_MCP,
                                         "authorization_headers": {"Authorization": "kubernetes"}}])


def test_k8s_allowed_user(k8s_gateway, kube, upstream):
    kube.reviews.clear()
    upstream.clear()
    reply = k8s_gateway.post("/v1/responses", {"input": "hi"}, headers=bearer("alice-token"))
    assert owner_of(k8s_gateway, reply) == "uid-alice"
    tools = {tool.get("server_label"): tool for tool in upstream.last()["body"]["tools"]}
    assert tools["kube"]["authorization"] == "alice-token"  # the user's own token, passed on
    token_review, access_review = kube.reviews[:2]
    assert token_review["spec"] == {"token": "alice-token"}
    assert access_review["spec"]["nonResourceAttributes"] == {"path": "/ls-access", "verb": "get"}
    assert access_review["spec"]["user"] == "alice" and "devs" in access_review["spec"]["groups"]
    assert {review["caller"] for review in kube.reviews} == {"Bearer gateway-sa-token-1"}


def test_kube_admin_is_named_by_the_cluster_id(k8s_gateway, kube):
    reply = k8s_gateway.post("/v1/responses", {"input": "hi"}, headers=bearer("kubeadmin-token"))
    assert owner_of(k8s_gateway, reply) == kube.cluster_id


def test_k8s_denied_user_is_403(k8s_gateway, upstream):
    upstream.clear()
    reply = k8s_gateway.post("/v1/responses", {"input": "hi"}, headers=bearer("bob-token"))
    assert reply.status == 403
    assert reply.json()["detail"] == {"response": FORBIDDEN, "cause": "User uid-bob is not authorized to access "
                                                                     "this endpoint."}
    assert upstream.requests() == []


@pytest.mark.parametrize("headers, cause", [
    ({"Authorization": "Bearer nobody-token"}, "Invalid or expired Kubernetes token"),
    ({}, "No Authorization header found"),
    ({"Authorization": "Token x"}, "No token found in Authorization header"),
])
def test_k8s_unknown_or_missing_token_is_401(k8s_gateway, headers, cause):
    reply = k8s_gateway.get("/v1/models", headers=headers)
    assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"
    assert reply.json()["detail"] == {"response": "Missing or invalid credentials provided by client", "cause": cause}


def test_k8s_service_account_token_is_reread_when_it_rotates(k8s_gateway, kube, sa_token):
    sa_token.write_text("gateway-sa-token-2\n")
    time.sleep(0.6)  # past the review cache
    kube.reviews.clear()
    assert k8s_gateway.get("/v1/models", headers=bearer("alice-token")).status == 200
    assert {review["caller"] for review in kube.reviews} == {"Bearer gateway-sa-token-2"}
    assert "service-account token re-read" in k8s_gateway.log()


def test_k8s_reviews_are_cached_briefly(k8s_gateway, kube):
    time.sleep(0.6)
    kube.reviews.clear()
    for _ in range(3):
        assert k8s_gateway.get("/v1/models", headers=bearer("alice-token")).status == 200
    assert [review["kind"] for review in kube.reviews] == ["TokenReview", "SubjectAccessReview"]


def test_k8s_api_down_is_503(k8s_gateway, kube):
    kube.server.down()
    try:
        time.sleep(0.6)
        reply = k8s_gateway.get("/v1/models", headers=bearer("alice-token"))
        assert reply.status == 503
        assert reply.json()["detail"] == {"response": "Unable to connect to Kubernetes API",
                                          "cause": "Connection error."}
    finally:
        kube.server.up()


def test_k8s_api_with_an_unknown_ca_is_503(gateway_factory, upstream, kube, sa_token, tmp_path):
    other_ca = TestCa(tmp_path / "other-ca")
    gateway = gateway_factory(upstream.url, authentication={
        "module": "k8s", **kube_settings(kube, sa_token), "k8s_ca_cert_path": str(other_ca.ca_path)})
    reply = gateway.get("/v1/models", headers=bearer("alice-token"))
    assert reply.status == 503 and reply.json()["detail"]["response"] == "Unable to connect to Kubernetes API"


def test_k8s_skip_tls_verification(gateway_factory, upstream, kube, sa_token):
    settings = {key: value for key, value in kube_settings(kube, sa_token).items() if key != "k8s_ca_cert_path"}
    gateway = gateway_factory(upstream.url, authentication={"module": "k8s", "skip_tls_verification": True,
                                                            **settings})
    assert gateway.get("/v1/models", headers=bearer("alice-token")).status == 200


# -- trusted-proxy -------------------------------------------------------------------


@pytest.fixture(scope="module")
def proxied(gateway_factory, upstream, kube, sa_token):
    return gateway_factory(upstream.url, authentication={
        "module": "trusted-proxy", **kube_settings(kube, sa_token),
        "trusted_proxy_config": {"allowed_service_accounts": [{"namespace": "ai", "name": "proxy"}]}},
        mcp_servers=[{"name": "kube", "url": KUBE_MCP, "authorization_headers": {"Authorization": "kubernetes"}}])


@pytest.mark.parametrize("headers, status, detail", [
    ({}, 401, {"response": "Missing or invalid credentials provided by client",
               "cause": "Missing Authorization header"}),
    ({"Authorization": "Basic eA=="}, 401, {"response": "Missing or invalid credentials provided by client",
                                            "cause": "No token found in Authorization header"}),
    ({"Authorization": "Bearer stolen", "X-Forwarded-User": "eve"}, 401,
     {"response": "Missing or invalid credentials provided by client",
      "cause": "Invalid or expired proxy service account token"}),
    ({"Authorization": "Bearer other-proxy-token", "X-Forwarded-User": "eve"}, 403,
     {"response": FORBIDDEN, "cause": "User system:serviceaccount:ai:other is not authorized to access this endpoint."}),
    ({"Authorization": "Bearer proxy-token"}, 401, {"response": "Missing or invalid credentials provided by client",
                                                    "cause": "Missing required header 'X-Forwarded-User'"}),
    ({"Authorization": "Bearer proxy-token", "X-Forwarded-User": "  "}, 401,
     {"response": "Missing or invalid credentials provided by client",
      "cause": "Missing required header 'X-Forwarded-User'"}),
])
def test_trusted_proxy_refusals(proxied, upstream, headers, status, detail):
    upstream.clear()
    reply = proxied.post("/v1/responses", {"input": "hi"}, headers=headers)
    assert reply.status == status and reply.json()["detail"] == detail
    if status == 401:
        assert reply.headers["www-authenticate"] == "Bearer"
    assert upstream.requests() == []


def test_trusted_proxy_forwarded_user(proxied, upstream):
    upstream.clear()
    reply = proxied.post("/v1/responses", {"input": "hi"},
                         headers={**bearer("proxy-token"), "X-Forwarded-User": "jane@example.com"})
    assert owner_of(proxied, reply) == "jane@example.com"
    # The proxy's own token is never passed on: the `kubernetes` MCP server is skipped.
    assert "kube" not in {tool.get("server_label") for tool in upstream.last()["body"].get("tools", [])}
    assert "proxy-token" not in proxied.log()


def post_with_headers(gateway, path: str, body: dict, headers: list[tuple[str, str]]) -> HttpReply:
    """POST with headers as a list: a name may appear more than once (a dict cannot say so)."""
    data = json.dumps(body).encode()
    conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
    try:
        conn.putrequest("POST", path)
        for name, value in [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *headers]:
            conn.putheader(name, value)
        conn.endheaders(data)
        resp = conn.getresponse()
        return HttpReply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
    finally:
        conn.close()


@pytest.mark.parametrize("users", [("eve-the-client", "jane@example.com"),
                                   ("jane@example.com", "jane@example.com"), ("eve-the-client", "")])
def test_trusted_proxy_refuses_a_user_header_sent_twice(proxied, upstream, users):
    """A proxy that appends its header to the client's copy must not let the client's
    copy choose the user: whatever the values, twice is refused (the first used to win)."""
    upstream.clear()
    before = GatewayDb.of(proxied).counts()
    headers = [("Authorization", "Bearer proxy-token"), *(("x-forwarded-user", user) for user in users)]
    reply = post_with_headers(proxied, "/v1/responses", {"input": "hi"}, headers)
    assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"
    cause = ("Header 'X-Forwarded-User' appears more than once: the proxy must replace the client's copy, "
             "not add to it")
    assert reply.json()["detail"] == {"response": "Missing or invalid credentials provided by client",
                                      "cause": cause}
    assert upstream.requests() == []
    assert GatewayDb.of(proxied).counts() == before
    assert "refused status=401 module=trusted-proxy route=POST /v1/responses client=127.0.0.1" \
           in proxied.messages() and f"cause={cause!r}" in proxied.messages()
    assert "eve-the-client" not in proxied.log()


def test_trusted_proxy_without_allowed_service_accounts(gateway_factory, upstream, kube, sa_token):
    """LCORE's default (no list) still works, and the start-up log says what it allows."""
    open_proxy = gateway_factory(upstream.url, authentication={"module": "trusted-proxy",
                                                               **kube_settings(kube, sa_token)})
    reply = open_proxy.post("/v1/responses", {"input": "hi"},
                            headers={**bearer("other-proxy-token"), "X-Forwarded-User": "anyone"})
    assert owner_of(open_proxy, reply) == "anyone"
    assert ("WARNING gateway: security: authentication.trusted_proxy_config.allowed_service_accounts is EMPTY: "
            "ANY service-account token the cluster accepts (every pod's, in every namespace) may name ANY user "
            "in X-Forwarded-User and act as that user") in open_proxy.messages()


def test_role_rules_over_the_token_review_groups(gateway_factory, upstream, kube, sa_token):
    """role_rules apply to the TokenReview user (its groups) as to JWT claims."""
    ruled = gateway_factory(upstream.url, authentication={
        "module": "k8s", **kube_settings(kube, sa_token),
        "jwk_config": {"jwt_configuration": {"role_rules": [
            {"jsonpath": "$.groups[*]", "operator": "contains", "value": "devs", "roles": ["devs"]}]}}},
        authorization={"access_rules": [{"role": "devs", "actions": ["get_models"]}]})
    assert ruled.get("/v1/models", headers=bearer("alice-token")).status == 200   # in group devs
    assert ruled.get("/v1/models", headers=bearer("kubeadmin-token")).status == 403  # allowed by SAR, not devs
