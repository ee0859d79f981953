"""The two Kubernetes API calls `k8s` and `trusted-proxy` make: `TokenReview` (who holds
this bearer) and `SubjectAccessReview` (may that user `get` the non-resource path
`/ls-access`, as LCORE asks). Plain aiohttp against `k8s_cluster_api`: the official
client is synchronous.

The gateway authenticates itself with its own service-account token, read from
`k8s_token_path` (default: the in-cluster path) and read again whenever the file
changes, because projected tokens are rotated by the kubelet."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import ssl
import time
from typing import Any, Generic, TypeVar

import aiohttp

from gateway import outbound
from gateway.config.auth import IN_CLUSTER_CA, IN_CLUSTER_TOKEN, AuthenticationConfig
from gateway.schema.errors import upstream_unavailable

log = logging.getLogger("gateway.identity.k8s")

BACKEND = "Kubernetes API"
ACCESS_PATH = "/ls-access"
_TIMEOUT = aiohttp.ClientTimeout(total=10)


class KubeApi:
    def __init__(self, config: AuthenticationConfig):
        base = config.k8s_cluster_api
        if base is None:  # in a pod: the API server the kubelet told us about
            base = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ.get('KUBERNETES_SERVICE_PORT', '443')}"
        self._base = base.rstrip("/")
        self._token_path = config.k8s_token_path or IN_CLUSTER_TOKEN
        self._token = ""
        self._token_stamp: tuple[int, int, int] | None = None
        ca = config.k8s_ca_cert_path or (IN_CLUSTER_CA if os.path.isfile(IN_CLUSTER_CA) else None)
        self._ssl: ssl.SSLContext | bool = False
        if self._base.startswith("https:") and not config.skip_tls_verification:
            self._ssl = ssl.create_default_context(cafile=ca)
        self._session: aiohttp.ClientSession | None = None
        self._cluster_id: str | None = None

    def service_account_token(self) -> str:
        """The gateway's own token, re-read when the file was replaced or rewritten."""
        try:
            stat = os.stat(self._token_path)
            stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
            if stamp != self._token_stamp:
                with open(self._token_path, encoding="utf-8") as file:
                    self._token = file.read().strip()
                if self._token_stamp is not None:
                    log.info("k8s: service-account token re-read from %s", self._token_path)
                self._token_stamp = stamp
        except OSError as exc:
            log.warning("k8s: cannot read the service-account token %s: %s", self._token_path, exc.strerror)
        return self._token

    async def token_review(self, token: str) -> dict[str, Any] | None:
        """The TokenReview `status.user` of an authenticated token, else None."""
        status = await self._create("/apis/authentication.k8s.io/v1/tokenreviews", {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}})
        user = status.get("user")
        if not status.get("authenticated") or not isinstance(user, dict):
            return None
        return user

    async def may_access(self, user: dict[str, Any]) -> bool:
        spec: dict[str, Any] = {"user": user.get("username"), "groups": user.get("groups") or [],
                                "nonResourceAttributes": {"path": ACCESS_PATH, "verb": "get"}}
        if user.get("uid"):
            spec["uid"] = user["uid"]
        if user.get("extra"):
            spec["extra"] = user["extra"]
        status = await self._create("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        return status.get("allowed") is True

    async def cluster_id(self) -> str:
        """The OpenShift cluster's id (ClusterVersion `version`), which LCORE uses as the
        user id of `kube:admin` (a user without a uid). Fetched once."""
        if self._cluster_id is None:
            data = await self._call("GET", "/apis/config.openshift.io/v1/clusterversions/version")
            spec = data.get("spec") if isinstance(data, dict) else None
            cluster_id = spec.get("clusterID") if isinstance(spec, dict) else None
            if not isinstance(cluster_id, str) or not cluster_id:
                log.warning("k8s: the ClusterVersion has no spec.clusterID")
                raise upstream_unavailable(BACKEND, "The cluster ID is not available.")
            self._cluster_id = cluster_id
        return self._cluster_id

    async def _create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        data = await self._call("POST", path, body)
        status = data.get("status") if isinstance(data, dict) else None
        return status if isinstance(status, dict) else {}

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=_TIMEOUT, connector=aiohttp.TCPConnector(ssl=self._ssl),
                                                  trace_configs=outbound.trace_configs("kubernetes api"))
        headers = {"Authorization": f"Bearer {self.service_account_token()}"}
        try:
            async with self._session.request(method, self._base + path, json=body, headers=headers) as reply:
                if reply.status not in (200, 201):
                    log.warning("k8s: %s answered HTTP %d", path, reply.status)
                    raise upstream_unavailable(BACKEND, f"The Kubernetes API answered HTTP {reply.status}.")
                return await reply.json(content_type=None)
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
            log.warning("k8s: cannot reach %s: %s", self._base, exc.__class__.__name__ if not str(exc) else exc)
            raise upstream_unavailable(BACKEND) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


T = TypeVar("T")


class ReviewCache(Generic[T]):
    """Outcomes of reviews by token hash, for a few seconds: a busy client does not cost
    two API calls per request, and a token revoked upstream stops working soon after."""

    MAX_ENTRIES = 50_000

    def __init__(self, seconds: float):
        self._seconds = seconds
        self._entries: dict[bytes, tuple[float, T]] = {}

    @staticmethod
    def key(token: str) -> bytes:
        return hashlib.sha256(token.encode()).digest()

    def get(self, key: bytes) -> T | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= time.monotonic():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: bytes, value: T) -> None:
        if not self._seconds:
            return
        if len(self._entries) >= self.MAX_ENTRIES:
            del self._entries[next(iter(self._entries))]
        self._entries[key] = (time.monotonic() + self._seconds, value)
