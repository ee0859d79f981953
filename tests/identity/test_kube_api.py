"""The Kubernetes API calls of `k8s` and `trusted-proxy`, against a small aiohttp server:
what TokenReview and SubjectAccessReview send and how their answers are read, the
gateway's own token re-read when the kubelet rotates it, any failure a 503; and the
short-lived cache of review outcomes. (The modules through `gateway serve`:
tests/e2e/test_k8s_auth.py.)"""

from __future__ import annotations

import os

import pytest
from aiohttp import web

from gateway.config.auth import AuthenticationConfig
from gateway.identity import kube_api
from gateway.identity.kube_api import KubeApi, ReviewCache
from gateway.schema.errors import ApiError


@pytest.fixture
async def kube(aiohttp_server, tmp_path):
    """A fake API server recording what it received; `answers[path]`: (status, JSON)."""
    received: list[tuple[str, str, str, dict]] = []
    answers: dict[str, tuple[int, object]] = {}

    async def handle(request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else {}
        received.append((request.method, request.path, request.headers["Authorization"], body))
        status, data = answers.get(request.path, (404, {}))
        return web.json_response(data, status=status)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    server = await aiohttp_server(app)
    token = tmp_path / "token"
    token.write_text("gateway-sa-token\n")
    api = KubeApi(AuthenticationConfig.model_validate({
        "module": "k8s", "k8s_cluster_api": str(server.make_url("/")), "k8s_token_path": str(token)}))
    yield api, answers, received, token
    await api.close()


TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


async def test_a_token_review_names_the_user_of_an_authenticated_token(kube):
    api, answers, received, _ = kube
    answers[TOKEN_REVIEWS] = (201, {"status": {"authenticated": True, "user": {"username": "ann", "uid": "1"}}})
    assert await api.token_review("user-token") == {"username": "ann", "uid": "1"}
    method, path, authorization, body = received[0]
    assert (method, path, authorization) == ("POST", TOKEN_REVIEWS, "Bearer gateway-sa-token")
    assert body == {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "user-token"}}
    for status in ({"authenticated": False}, {"authenticated": True}, {"authenticated": True, "user": "ann"}):
        answers[TOKEN_REVIEWS] = (201, {"status": status})
        assert await api.token_review("t") is None


async def test_an_access_review_asks_for_lcores_path(kube):
    api, answers, received, _ = kube
    answers[ACCESS_REVIEWS] = (201, {"status": {"allowed": True}})
    user = {"username": "ann", "uid": "1", "groups": ["devs"], "extra": {"scopes": ["x"]}}
    assert await api.may_access(user) is True
    assert received[0][3]["spec"] == {"user": "ann", "groups": ["devs"], "uid": "1", "extra": {"scopes": ["x"]},
                                      "nonResourceAttributes": {"path": "/ls-access", "verb": "get"}}
    answers[ACCESS_REVIEWS] = (201, {"status": {"allowed": "yes"}})   # only a real true allows
    assert await api.may_access({"username": "bo"}) is False
    assert received[1][3]["spec"]["groups"] == [] and "uid" not in received[1][3]["spec"]


async def test_the_cluster_id_is_fetched_once(kube):
    api, answers, received, _ = kube
    answers["/apis/config.openshift.io/v1/clusterversions/version"] = (200, {"spec": {"clusterID": "c-42"}})
    assert await api.cluster_id() == "c-42" and await api.cluster_id() == "c-42"
    assert len(received) == 1


async def test_failures_are_503_without_details(kube):
    api, answers, _, _ = kube
    answers[TOKEN_REVIEWS] = (403, {"message": "forbidden"})
    with pytest.raises(ApiError) as refused:
        await api.token_review("t")
    assert refused.value.status == 503 and refused.value.cause == "The Kubernetes API answered HTTP 403."
    with pytest.raises(ApiError) as no_id:   # a ClusterVersion without an id
        await api.cluster_id()
    assert no_id.value.status == 503
    closed = KubeApi(AuthenticationConfig.model_validate({
        "module": "k8s", "k8s_cluster_api": "http://127.0.0.1:1", "k8s_token_path": str(kube[3])}))
    try:
        with pytest.raises(ApiError) as unreachable:
            await closed.token_review("t")
        assert unreachable.value.status == 503 and unreachable.value.cause == "Connection error."
    finally:
        await closed.close()


async def test_the_gateways_token_is_read_again_when_rotated(kube):
    api, answers, received, token = kube
    answers[TOKEN_REVIEWS] = (201, {"status": {}})
    await api.token_review("t")
    replacement = token.with_name("token.new")
    replacement.write_text("rotated-token")
    os.replace(replacement, token)   # as the kubelet swaps projected tokens
    await api.token_review("t")
    assert [authorization for _, _, authorization, _ in received] == ["Bearer gateway-sa-token",
                                                                      "Bearer rotated-token"]


def test_review_outcomes_are_cached_for_a_few_seconds(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(kube_api.time, "monotonic", lambda: clock[0])
    cache: ReviewCache[dict] = ReviewCache(5)
    key = ReviewCache.key("token")
    assert key == ReviewCache.key("token") != ReviewCache.key("other") and b"token" not in key
    cache.put(key, {"username": "ann"})
    clock[0] = 104.9
    assert cache.get(key) == {"username": "ann"}
    clock[0] = 105.0   # a token revoked upstream stops working soon after
    assert cache.get(key) is None and cache._entries == {}
    off: ReviewCache[dict] = ReviewCache(0)
    off.put(key, {})
    assert off.get(key) is None


def test_the_cache_drops_its_oldest_entry_when_full(monkeypatch):
    monkeypatch.setattr(ReviewCache, "MAX_ENTRIES", 2)
    cache: ReviewCache[int] = ReviewCache(60)
    for n in range(3):
        cache.put(ReviewCache.key(str(n)), n)
    assert [cache.get(ReviewCache.key(str(n))) for n in range(3)] == [None, 1, 2]
