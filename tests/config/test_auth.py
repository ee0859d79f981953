"""The authentication section of the configuration: module blocks, URLs, start-up warnings."""

from __future__ import annotations

import pytest

from gateway.config import ConfigError, parse_config

BASE = {"name": "x", "llama_stack": {"url": "http://127.0.0.1:1"}}


def problems(authentication: dict) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config({**BASE, "authentication": authentication})
    return caught.value.problems


def test_jwk_token_needs_its_block():
    assert problems({"module": "jwk-token"}) == ["authentication.jwk_config: required by module jwk-token"]


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/jwks", "keys.example", "http:///jwks"])
def test_jwks_url_must_be_http_or_https(url):
    assert problems({"module": "jwk-token", "jwk_config": {"url": url}})[0].startswith(
        "authentication.jwk_config.url: must be an http:// or https:// URL")


def test_plain_http_jwks_on_another_host_is_a_warning_or_refused_when_strict():
    config = parse_config({**BASE, "authentication": {"module": "jwk-token", "jwk_config": {
        "url": "http://mock-jwks:8000/.well-known/jwks.json", "audience": "gw"}}})
    assert [w for w in config.authentication.warnings() if "plain http://" in w] == [
        "authentication.jwk_config.url http://mock-jwks:8000/.well-known/jwks.json is plain http:// to another "
        "host: the key set travels unauthenticated and unencrypted, so anyone on that path can replace the keys "
        "and mint tokens for ANY user; use https://, or set jwk_config.require_https: true to refuse to start "
        "with it"]
    for url in ("https://keys.example/jwks", "http://127.0.0.1:8000/jwks"):
        quiet = parse_config({**BASE, "authentication": {"module": "jwk-token", "jwk_config": {"url": url}}})
        assert not [w for w in quiet.authentication.warnings() if "plain http://" in w]
    assert problems({"module": "jwk-token", "jwk_config": {"url": "http://keys.example/jwks",
                                                           "require_https": True}})[0].startswith(
        "authentication.jwk_config.url: must be an https:// URL (http:// only for a loopback")


@pytest.mark.parametrize("url", ["https://keys.example/jwks", "http://127.0.0.1:8000/jwks", "http://localhost/j",
                                 "http://[::1]:80/jwks", "http://keys.example/jwks"])
def test_jwks_urls_accepted(url):
    parse_config({**BASE, "authentication": {"module": "jwk-token", "jwk_config": {"url": url}}})


def test_jwk_algorithms_are_asymmetric_only():
    assert problems({"module": "jwk-token", "jwk_config": {"url": "https://k/j", "algorithms": ["HS256"]}})[0] \
        .startswith("authentication.jwk_config.algorithms[0]:")


def test_k8s_needs_a_service_account_token(tmp_path):
    found = problems({"module": "k8s", "k8s_cluster_api": "https://127.0.0.1:1",
                      "k8s_token_path": str(tmp_path / "absent")})
    assert found == [f"authentication.k8s_token_path: the service-account token file {tmp_path / 'absent'} "
                     "does not exist"]


def test_k8s_cluster_api_must_be_https(tmp_path):
    assert problems({"module": "k8s", "k8s_cluster_api": "http://kube.example:6443"})[0].startswith(
        "authentication.k8s_cluster_api: must be an https:// URL")


CHOOSE = "lets every caller choose its own user id"
PROBES = "skip_for_health_probes: false"
AUDIENCE = "audience is not set: a token the issuer minted for ANY other service"
NO_EXP = "require_exp: false: a signed token without `exp` never expires"
JWKS = {"url": "https://keys.example/jwks"}


@pytest.mark.parametrize("authentication, present, absent", [
    ({"module": "noop"}, [CHOOSE], [PROBES]),
    ({"module": "noop-with-token"}, [CHOOSE, PROBES], []),
    ({"module": "noop-with-token", "skip_for_health_probes": True}, [CHOOSE], [PROBES]),
    ({"module": "rh-identity"}, ["strips any client copy", PROBES], [CHOOSE]),
    ({"module": "jwk-token", "jwk_config": JWKS}, [AUDIENCE], [NO_EXP]),
    ({"module": "jwk-token", "jwk_config": {**JWKS, "audience": "gw", "require_exp": False}}, [NO_EXP], [AUDIENCE]),
    # A jwk_config given for its role_rules alone verifies no token: nothing to say about it.
    ({"module": "noop", "jwk_config": {"jwt_configuration": {"role_rules": []}}}, [CHOOSE], [AUDIENCE]),
])
def test_start_up_warnings(authentication, present, absent):
    warnings = " | ".join(parse_config({**BASE, "authentication": authentication}).authentication.warnings())
    assert all(text in warnings for text in present), warnings
    assert not any(text in warnings for text in absent), warnings
