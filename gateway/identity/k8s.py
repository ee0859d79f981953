"""`k8s`: the bearer is a Kubernetes token. `TokenReview` says whose it is, then
`SubjectAccessReview` says whether that user may `get` `/ls-access` (LCORE's check);
refused → 403. The identity document is the TokenReview user (username, uid, groups,
extra), which `role_rules` can match."""

from __future__ import annotations

from typing import Mapping

from gateway.config.auth import AuthenticationConfig
from gateway.identity import Identity
from gateway.identity.kube_api import KubeApi, ReviewCache
from gateway.identity.noop_with_token import bearer_token
from gateway.schema.errors import ApiError, endpoint_forbidden, unauthorized


KUBE_ADMIN = "kube:admin"


class K8sAuthenticator:
    credential_header = "Authorization"

    def __init__(self, config: AuthenticationConfig):
        self.api = KubeApi(config)
        self._reviews: ReviewCache[Identity | ApiError] = ReviewCache(config.k8s_review_cache_seconds)

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        token = bearer_token(headers)
        key = self._reviews.key(token)
        outcome = self._reviews.get(key)
        if outcome is None:
            outcome = await self._review(token)
            self._reviews.put(key, outcome)
        if isinstance(outcome, ApiError):
            raise outcome
        return outcome

    async def _review(self, token: str) -> Identity | ApiError:
        user = await self.api.token_review(token)
        if user is None or not user.get("username"):
            return unauthorized("Invalid or expired Kubernetes token")
        username = str(user["username"])
        # OpenShift's kube:admin has no uid: LCORE names it by the cluster's id.
        user_id = await self.api.cluster_id() if username == KUBE_ADMIN else str(user.get("uid") or username)
        if not await self.api.may_access(user):
            return endpoint_forbidden(user_id)
        return Identity(user_id=user_id, username=username, token=token, skip_userid_check=False,
                        document={"username": username, "uid": user_id, "groups": list(user.get("groups") or []),
                                  "extra": dict(user.get("extra") or {})})

    async def close(self) -> None:
        await self.api.close()
