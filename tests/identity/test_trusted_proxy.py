"""`trusted-proxy`: the proxy's own token reviewed (and, when configured, one of the
allowed service accounts), the end user named once in `user_header`; the proxy's token
never passed on. The Kubernetes API is a fake here (the module through `gateway serve`:
tests/e2e/test_k8s_auth.py)."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from gateway.config.auth import AuthenticationConfig
from gateway.identity.trusted_proxy import TrustedProxyAuthenticator
from gateway.schema.errors import ApiError

PROXY = "system:serviceaccount:ai:proxy"


class Api:
    def __init__(self) -> None:
        self.reviews = 0

    async def token_review(self, token: str) -> dict[str, Any] | None:
        self.reviews += 1
        return {"proxy-token": {"username": PROXY}, "other-token": {"username": "system:serviceaccount:x:y"},
                "nameless": {"uid": "1"}}.get(token)

    async def close(self) -> None:
        pass


def authenticator(tmp_path, **proxy_config: Any) -> TrustedProxyAuthenticator:
    token = tmp_path / "sa"
    token.write_text("sa")
    auth = TrustedProxyAuthenticator(AuthenticationConfig.model_validate({
        "module": "trusted-proxy", "k8s_cluster_api": "https://kube.invalid", "k8s_token_path": str(token),
        "trusted_proxy_config": proxy_config}))
    auth.api = Api()   # type: ignore[assignment]
    return auth


def headers(token: str, *users: str, header: str = "X-Forwarded-User") -> CIMultiDict[str]:
    found = CIMultiDict([("Authorization", f"Bearer {token}")])
    for user in users:
        found.add(header, user)
    return found


async def refusal(auth: TrustedProxyAuthenticator, given: Any) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await auth.authenticate(given, {})
    return refused.value


async def test_the_forwarded_user_with_the_proxy_in_the_document(tmp_path):
    auth = authenticator(tmp_path, allowed_service_accounts=[{"namespace": "ai", "name": "proxy"}])
    caller = await auth.authenticate(headers("proxy-token", " ann "), {})
    assert (caller.user_id, caller.username, caller.token) == ("ann", "ann", "")   # the proxy's token stays here
    assert caller.document == {"username": "ann", "proxy": PROXY}


async def test_the_proxy_must_be_reviewed_and_allowed(tmp_path):
    auth = authenticator(tmp_path, allowed_service_accounts=[{"namespace": "ai", "name": "proxy"}])
    assert (await refusal(auth, headers("bad-token", "ann"))).status == 401
    assert (await refusal(auth, headers("nameless", "ann"))).status == 401
    assert (await refusal(auth, headers("other-token", "ann"))).status == 403
    assert (await refusal(auth, {})).status == 401
    # Without allowed accounts (LCORE's default, warned at start-up) any reviewed token may name users.
    assert (await authenticator(tmp_path).authenticate(headers("other-token", "ann"), {})).user_id == "ann"


async def test_the_user_must_be_named_exactly_once(tmp_path):
    auth = authenticator(tmp_path, user_header="X-Remote-User")
    assert (await auth.authenticate(headers("proxy-token", "ann", header="X-Remote-User"), {})).user_id == "ann"
    assert (await refusal(auth, headers("proxy-token", "ann"))).cause == "Missing required header 'X-Remote-User'"
    assert (await refusal(auth, headers("proxy-token", "  ", header="X-Remote-User"))).status == 401
    # A proxy that appends instead of replacing would let the client's copy choose the user.
    twice = await refusal(auth, headers("proxy-token", "mallory", "ann", header="X-Remote-User"))
    assert twice.status == 401 and "appears more than once" in twice.cause


async def test_the_proxys_review_is_cached(tmp_path):
    auth = authenticator(tmp_path)
    for user in ("ann", "bo", "cy"):
        await auth.authenticate(headers("proxy-token", user), {})
    assert auth.api.reviews == 1   # type: ignore[attr-defined]
