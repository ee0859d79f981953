"""`trusted-proxy`: an authenticating proxy in front of the gateway presents its own
service-account token (checked with `TokenReview`, optionally against
`allowed_service_accounts`) and names the end user in `user_header`.

The proxy's token is never passed on: `Identity.token` is empty, so MCP servers
configured with `authorization_headers: kubernetes` get nothing (and are skipped).

A request naming its user more than once is refused: a proxy that appends its own
header to the client's, instead of replacing it, would otherwise let the client's copy
choose the user (the first value used to win). Without `allowed_service_accounts`
(LCORE's default) any token the cluster accepts may name any user: the configuration
warns at start-up (`config/auth.py`, `AuthenticationConfig.warnings`)."""

from __future__ import annotations

from typing import Any, Mapping

from multidict import MultiMapping

from gateway.config.auth import AuthenticationConfig, TrustedProxyConfig
from gateway.identity import Identity
from gateway.identity.kube_api import KubeApi, ReviewCache
from gateway.identity.noop_with_token import bearer_token
from gateway.schema.errors import endpoint_forbidden, unauthorized


class TrustedProxyAuthenticator:
    credential_header = "Authorization"

    def __init__(self, config: AuthenticationConfig):
        self._config = config.trusted_proxy_config or TrustedProxyConfig()
        self._allowed = {f"system:serviceaccount:{account.namespace}:{account.name}"
                         for account in self._config.allowed_service_accounts}
        self.api = KubeApi(config)
        # The proxy's TokenReview user, or {} when the token was not authenticated.
        self._reviews: ReviewCache[dict[str, Any]] = ReviewCache(config.k8s_review_cache_seconds)

    async def authenticate(self, headers: Mapping[str, str], query: Mapping[str, str]) -> Identity:
        if not headers.get("Authorization"):
            raise unauthorized("Missing Authorization header", code="missing_credentials")
        token = bearer_token(headers)
        key = self._reviews.key(token)
        proxy = self._reviews.get(key)
        if proxy is None:
            proxy = await self.api.token_review(token) or {}
            self._reviews.put(key, proxy)
        if not proxy:
            raise unauthorized("Invalid or expired proxy service account token")
        account = proxy.get("username")
        if not account:
            raise unauthorized("Invalid service account token: missing username")
        if self._allowed and account not in self._allowed:
            raise endpoint_forbidden(str(account))
        header = self._config.user_header
        named = headers.getall(header, ()) if isinstance(headers, MultiMapping) else [headers.get(header) or ""]
        if len(named) > 1:
            raise unauthorized(f"Header '{header}' appears more than once: the proxy must replace the "
                               "client's copy, not add to it")
        user = (named[0] if named else "").strip()
        if not user:
            raise unauthorized(f"Missing required header '{header}'", code="missing_credentials")
        return Identity(user_id=user, username=user, token="", skip_userid_check=False,
                        document={"username": user, "proxy": str(account)})

    async def close(self) -> None:
        await self.api.close()
