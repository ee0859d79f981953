"""`k8s`: a bearer token reviewed (TokenReview), its user allowed or not (SubjectAccessReview),
`kube:admin` named by the cluster's id; outcomes, refusals included, cached per token for
a few seconds. The Kubernetes API is a fake here (its calls: test_kube_api.py; the module
through `gateway serve`: tests/e2e/test_k8s_auth.py)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.config.auth import AuthenticationConfig
from gateway.identity.k8s import K8sAuthenticator
from gateway.schema.errors import ApiError

ANN = {"username": "ann", "uid": "u-1", "groups": ["devs"], "extra": {"scopes": ["a"]}}


class Api:
    def __init__(self, users: dict[str, dict[str, Any]], allowed: set[str]):
        self.users, self.allowed = users, allowed
        self.calls: list[str] = []

    async def token_review(self, token: str) -> dict[str, Any] | None:
        self.calls.append(f"review {token}")
        return self.users.get(token)

    async def may_access(self, user: dict[str, Any]) -> bool:
        self.calls.append(f"access {user['username']}")
        return user["username"] in self.allowed

    async def cluster_id(self) -> str:
        return "cluster-42"

    async def close(self) -> None:
        pass


def authenticator(tmp_path, api: Api, cache_seconds: float = 10) -> K8sAuthenticator:
    token = tmp_path / "sa"
    token.write_text("sa")
    auth = K8sAuthenticator(AuthenticationConfig.model_validate({
        "module": "k8s", "k8s_cluster_api": "https://kube.invalid", "k8s_token_path": str(token),
        "k8s_review_cache_seconds": cache_seconds}))
    auth.api = api   # type: ignore[assignment]
    return auth


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_reviewed_and_allowed_user(tmp_path):
    auth = authenticator(tmp_path, Api({"t-ann": ANN}, {"ann"}))
    caller = await auth.authenticate(bearer("t-ann"), {})
    assert (caller.user_id, caller.username, caller.token) == ("u-1", "ann", "t-ann")   # passed on to MCP servers
    assert caller.document == {"username": "ann", "uid": "u-1", "groups": ["devs"], "extra": {"scopes": ["a"]}}


async def test_kube_admin_is_named_by_the_clusters_id(tmp_path):
    auth = authenticator(tmp_path, Api({"t": {"username": "kube:admin"}}, {"kube:admin"}))
    assert (await auth.authenticate(bearer("t"), {})).user_id == "cluster-42"


async def test_refusals_401_and_403(tmp_path):
    auth = authenticator(tmp_path, Api({"t-bo": {"username": "bo"}, "t-nameless": {"uid": "x"}}, set()))
    for token, status in (("t-unknown", 401), ("t-nameless", 401), ("t-bo", 403)):
        with pytest.raises(ApiError) as refused:
            await auth.authenticate(bearer(token), {})
        assert refused.value.status == status
    with pytest.raises(ApiError) as missing:
        await auth.authenticate({}, {})
    assert missing.value.status == 401


async def test_outcomes_are_cached_per_token_refusals_too(tmp_path):
    api = Api({"t-ann": ANN, "t-bo": {"username": "bo"}}, {"ann"})
    auth = authenticator(tmp_path, api)
    for _ in range(3):
        await auth.authenticate(bearer("t-ann"), {})
        with pytest.raises(ApiError):
            await auth.authenticate(bearer("t-bo"), {})
    assert api.calls == ["review t-ann", "access ann", "review t-bo", "access bo"]
    uncached = authenticator(tmp_path, api := Api({"t-ann": ANN}, {"ann"}), cache_seconds=0)
    await uncached.authenticate(bearer("t-ann"), {})
    await uncached.authenticate(bearer("t-ann"), {})
    assert len(api.calls) == 4
