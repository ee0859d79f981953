"""The `authentication` section of the configuration: LCORE's keys (`module`,
`skip_for_health_probes`, `k8s_*`, `jwk_config`, `rh_identity_config`,
`trusted_proxy_config`, `api_key_config`) and ours, each marked "Ours"."""

from __future__ import annotations

import ipaddress
import os
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from gateway.config.access import ApiKeyConfig
from gateway.config.base import Strict

SUPPORTED_AUTH_MODULES = ("noop", "noop-with-token", "api-key-token", "jwk-token", "k8s", "rh-identity",
                          "trusted-proxy")
LCORE_AUTH_MODULES = SUPPORTED_AUTH_MODULES

# LCORE's default identity: who a request is when no module authenticates it (`noop`,
# auth disabled) or its module names no user.
DEFAULT_USER_ID = "00000000-0000-0000-0000-000"
DEFAULT_USERNAME = "lightspeed-user"


def _https_or_loopback(value: str) -> str:
    """Keys and reviews must not travel in clear text: https, or http to this host only."""
    parts = urlsplit(value)
    if parts.scheme == "https" and parts.hostname:
        return value
    if parts.scheme == "http" and parts.hostname and _is_loopback(parts.hostname):
        return value
    raise ValueError(f"must be an https:// URL (http:// only for a loopback address), got {value!r}")


def _http_or_https(value: str) -> str:
    """LCORE's rule for the JWKS URL: any http(s) URL with a host (plain http to another
    host is warned about, `AuthenticationConfig.warnings`, or refused by `require_https`)."""
    parts = urlsplit(value)
    if parts.scheme in ("http", "https") and parts.hostname:
        return value
    raise ValueError(f"must be an http:// or https:// URL, got {value!r}")


def _plain_http_to_another_host(value: str | None) -> bool:
    parts = urlsplit(value or "")
    return parts.scheme == "http" and bool(parts.hostname) and not _is_loopback(parts.hostname or "")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class JwtConfiguration(Strict):
    user_id_claim: str = "user_id"
    username_claim: str = "username"
    # Evaluated against the verified claims by the authorization code (identity/roles.py).
    role_rules: list[Any] = []


# Asymmetric signature algorithms only: `none` and HMAC are never accepted for JWKS keys.
JwtAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
JWT_ALGORITHMS: tuple[JwtAlgorithm, ...] = get_args(JwtAlgorithm)


class JwkConfig(Strict):
    # Required by jwk-token; other modules may give a jwk_config for its role_rules alone.
    url: str | None = None
    jwt_configuration: JwtConfiguration = JwtConfiguration()
    # Ours: the CA bundle that signs the JWKS server's certificate (default: the system's).
    ca_cert_path: str | None = None
    # Ours: `iss` and `aud` the token must carry, when set.
    issuer: str | None = None
    audience: str | list[str] | None = None
    # Ours: what a key without `alg` may verify, by its `kty` (and curve).
    algorithms: list[JwtAlgorithm] = ["RS256", "PS256", "ES256", "ES384", "ES512", "EdDSA"]
    # Ours: seconds the key set is used before it is fetched again (LCORE: one hour).
    jwks_cache_seconds: float = Field(3600, ge=0)
    # Ours: an unknown `kid` refetches the key set at most once per this many seconds.
    jwks_refetch_min_seconds: float = Field(10, ge=0)
    jwks_timeout_seconds: float = Field(5, gt=0)
    # Ours: clock skew tolerated on exp, nbf and iat.
    leeway_seconds: float = Field(30, ge=0, le=600)
    # Ours: a token without `exp` is refused (it would never expire); false accepts it, as
    # LCORE does.
    require_exp: bool = True
    # Ours: a verified token is remembered (by its hash) for this long, never past its exp;
    # 0 verifies the signature on every request.
    verified_token_cache_seconds: float = Field(60, ge=0)

    # Ours: true refuses a plain http:// `url` unless its host is a loopback address (LCORE,
    # and the default, accept it with a start-up `security:` warning).
    require_https: bool = False

    _url_shape = field_validator("url")(lambda cls, value: None if value is None else _http_or_https(value))

    @model_validator(mode="after")
    def _url_strict(self) -> "JwkConfig":
        if self.require_https and self.url is not None:
            try:
                _https_or_loopback(self.url)
            except ValueError as exc:
                raise ValueError(f"url: {exc} (require_https: true)") from None
        return self


class RhIdentityConfig(Strict):
    required_entitlements: list[str] = []
    max_header_size: int = Field(8192, ge=1)


class AllowedServiceAccount(Strict):
    namespace: str = Field(min_length=1)
    name: str = Field(min_length=1)


class TrustedProxyConfig(Strict):
    user_header: str = Field("X-Forwarded-User", min_length=1)
    allowed_service_accounts: list[AllowedServiceAccount] = []


IN_CLUSTER_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
IN_CLUSTER_TOKEN = f"{IN_CLUSTER_DIR}/token"
IN_CLUSTER_CA = f"{IN_CLUSTER_DIR}/ca.crt"


class AuthenticationConfig(Strict):
    module: str = "noop"
    skip_tls_verification: bool = False
    skip_for_health_probes: bool = False
    skip_for_metrics: bool = False
    k8s_cluster_api: str | None = None
    k8s_ca_cert_path: str | None = None
    # Ours: the gateway's own service-account token for TokenReview and
    # SubjectAccessReview (default: the in-cluster path); re-read when it changes.
    k8s_token_path: str | None = None
    # Ours: seconds a TokenReview/SubjectAccessReview outcome is reused for the same token.
    k8s_review_cache_seconds: float = Field(10, ge=0)
    jwk_config: JwkConfig | None = None
    api_key_config: ApiKeyConfig | None = None
    rh_identity_config: RhIdentityConfig | None = None
    trusted_proxy_config: TrustedProxyConfig | None = None

    @field_validator("module")
    @classmethod
    def _module_supported(cls, value: str) -> str:
        if value not in LCORE_AUTH_MODULES:
            raise ValueError(f"unknown module {value!r}; one of {', '.join(LCORE_AUTH_MODULES)}")
        if value not in SUPPORTED_AUTH_MODULES:
            # Starting without the configured authentication would open the gateway to
            # everyone, so this is an error, not a warning.
            raise ValueError(f"{value!r} is not supported by this version; "
                             f"supported: {', '.join(SUPPORTED_AUTH_MODULES)}")
        return value

    @field_validator("k8s_cluster_api")
    @classmethod
    def _cluster_api_shape(cls, value: str | None) -> str | None:
        return None if value is None else _https_or_loopback(value)

    def warnings(self) -> list[str]:
        """What an operator must know about this choice of module."""
        found = []
        if self.module in ("noop", "noop-with-token"):
            found.append(f"authentication.module: {self.module} lets every caller choose its own user id "
                         "(?user_id=); conversations, quotas and anything per user are advisory")
        if self.module != "noop" and not self.skip_for_health_probes:
            found.append(f"authentication.skip_for_health_probes: false, so /liveness and /readiness need "
                         f"{self.module} credentials (kubelet probes carry none); set it to true to let "
                         "probes without credentials through")
        if self.module == "jwk-token" and self.jwk_config is not None:
            if self.jwk_config.audience is None:
                found.append("authentication.jwk_config.audience is not set: a token the issuer minted for ANY "
                             "other service (any `aud`, or none) is accepted here; set it to the audience the "
                             "issuer puts in tokens meant for this gateway")
            if _plain_http_to_another_host(self.jwk_config.url):
                found.append(f"authentication.jwk_config.url {self.jwk_config.url} is plain http:// to another "
                             "host: the key set travels unauthenticated and unencrypted, so anyone on that path "
                             "can replace the keys and mint tokens for ANY user; use https://, or set "
                             "jwk_config.require_https: true to refuse to start with it")
            if not self.jwk_config.require_exp:
                found.append("authentication.jwk_config.require_exp: false: a signed token without `exp` never "
                             "expires; it is accepted for as long as its key is in the key set")
        if self.module == "trusted-proxy" and not (self.trusted_proxy_config
                                                   and self.trusted_proxy_config.allowed_service_accounts):
            header = self.trusted_proxy_config.user_header if self.trusted_proxy_config else "X-Forwarded-User"
            found.append("authentication.trusted_proxy_config.allowed_service_accounts is EMPTY: ANY service-account "
                         "token the cluster accepts (every pod's, in every namespace) may name ANY user in "
                         f"{header} and act as that user; list the proxy's service account(s) there")
        if self.module == "rh-identity":
            found.append("authentication.module: rh-identity trusts the x-rh-identity header as sent: run the "
                         "gateway only behind a proxy that sets it and strips any client copy")
        return found

    @model_validator(mode="after")
    def _module_block(self) -> "AuthenticationConfig":
        if self.module == "jwk-token" and self.jwk_config is None:
            raise ValueError("jwk_config: required by module jwk-token")
        if self.module == "jwk-token" and self.jwk_config is not None and self.jwk_config.url is None:
            raise ValueError("jwk_config.url: required by module jwk-token")
        if self.module == "api-key-token" and self.api_key_config is None:
            raise ValueError("api_key_config: required by module api-key-token")
        if self.module in ("k8s", "trusted-proxy"):
            if self.k8s_cluster_api is None and not os.environ.get("KUBERNETES_SERVICE_HOST"):
                raise ValueError(f"k8s_cluster_api: required by module {self.module} outside a cluster")
            token_path = self.k8s_token_path or IN_CLUSTER_TOKEN
            if not os.path.isfile(token_path):
                key = "k8s_token_path" if self.k8s_token_path else "k8s_token_path (default)"
                raise ValueError(f"{key}: the service-account token file {token_path} does not exist")
        return self
