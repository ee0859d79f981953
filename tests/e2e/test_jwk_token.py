"""`jwk-token` through `gateway serve`, against a real JWKS server on loopback serving
RSA and EC keys made with `cryptography`: success, the attack table, the header size
limit, a flood of random `kid`s, key rotation without a restart, and a key server that
is down with and without keys already fetched."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import uuid

import pytest

from tests.support.auth_peers import (JwksServer, SigningKey, TestCa, b64url, claims, hmac_token, owner_of,
                                     unsigned_token)
from tests.support.gateway_db import Counts, GatewayDb
from tests.support.gateway_proc import GATEWAY_BIN

RSA = SigningKey.rsa("rsa-1")              # the JWK names alg RS256
EC = SigningKey.ec("ec-1")                 # no alg in the JWK: ES256 from kty EC, crv P-256
STRANGER = SigningKey.rsa("stranger")      # never served
IMPOSTOR = SigningKey.rsa("rsa-1")         # serves nothing, claims rsa-1's kid
KUBE_MCP = "http://127.0.0.1:9/kube"


def jwk_config(url: str, **extra) -> dict:
    return {"url": url, "issuer": "https://issuer.test", "audience": "gateway", "leeway_seconds": 5,
            "jwt_configuration": {"user_id_claim": "sub", "username_claim": "preferred_username"}, **extra}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def jwks():
    server = JwksServer(RSA, EC)
    yield server
    server.close()


@pytest.fixture(scope="module")
def gateway(gateway_factory, upstream, jwks):
    return gateway_factory(upstream.url, authentication={
        "module": "jwk-token", "jwk_config": jwk_config(jwks.url, jwks_refetch_min_seconds=3)},
        mcp_servers=[{"name": "kube", "url": KUBE_MCP, "authorization_headers": {"Authorization": "kubernetes"}}])


def test_rsa_and_ec_tokens_identify_the_user(gateway, upstream):
    for key, user in ((RSA, "rsa-user"), (EC, "ec-user")):
        token = key.sign(claims(sub=user))
        upstream.clear()
        reply = gateway.post("/v1/responses", {"input": "hello"}, headers=bearer(token))
        assert owner_of(gateway, reply) == user
        # `kubernetes` MCP headers pass the end user's own verified token on.
        tools = {tool.get("server_label"): tool for tool in upstream.last()["body"]["tools"]}
        assert tools["kube"]["authorization"] == token
    # Without `kid`, the token is tried against the keys its algorithm allows.
    assert owner_of(gateway, gateway.post("/v1/responses", {"input": "no kid"},
                                          headers=bearer(EC.sign(claims(sub="no-kid"), kid=None)))) == "no-kid"


def _attacks() -> list[tuple[str, str, str]]:
    header, _, signature = RSA.sign(claims()).split(".")
    tampered_payload = b64url(json.dumps(claims(sub="admin")).encode())
    now = int(time.time())
    return [
        ("alg none", unsigned_token(claims(), {"alg": "none", "kid": "rsa-1", "typ": "JWT"}),
         "Token signed by unknown key"),
        ("alg none, no kid", unsigned_token(claims(), {"alg": "none"}), "Token signed by unknown key"),
        ("HS256 with the public key as secret",
         hmac_token(claims(), {"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, RSA.public_pem()),
         "Token signed by unknown key"),
        ("RSA key named as ES256", unsigned_token(claims(), {"alg": "ES256", "kid": "rsa-1"}),
         "Token signed by unknown key"),
        ("expired", RSA.sign(claims(exp=now - 600, iat=now - 1200, nbf=now - 1200)), "Token has expired"),
        ("not yet valid (nbf)", RSA.sign(claims(nbf=now + 600)), "Token validation failed"),
        ("issued in the future (iat)", RSA.sign(claims(iat=now + 600)), "Token validation failed"),
        ("unknown kid", STRANGER.sign(claims()), "Token signed by unknown key"),
        ("another key claiming a served kid", IMPOSTOR.sign(claims()), "Invalid token signature"),
        ("tampered payload", f"{header}.{tampered_payload}.{signature}", "Invalid token signature"),
        ("wrong issuer", RSA.sign(claims(iss="https://evil.test")), "Token validation failed"),
        ("wrong audience", RSA.sign(claims(aud="someone-else")), "Token validation failed"),
        ("no audience", RSA.sign({k: v for k, v in claims().items() if k != "aud"}), "Token validation failed"),
        ("no expiry (exp)", RSA.sign({k: v for k, v in claims().items() if k != "exp"}), "Token missing claim: exp"),
        ("missing user id claim", RSA.sign({k: v for k, v in claims().items() if k != "sub"}),
         "Token missing claim: sub"),
        ("missing username claim", RSA.sign({k: v for k, v in claims().items() if k != "preferred_username"}),
         "Token missing claim: preferred_username"),
        ("not a JWT", "this-is-not-a-jwt", "Token could not be decoded"),
        ("three parts of garbage", "abc.def.ghi", "Token could not be decoded"),
    ]


ATTACKS = _attacks()


@pytest.mark.parametrize("name, token, cause", ATTACKS, ids=[name for name, _, _ in ATTACKS])
def test_attacks_are_refused_with_their_cause(gateway, upstream, name, token, cause):
    upstream.clear()
    user = f"attack-{uuid.uuid4().hex[:8]}"
    reply = gateway.post(f"/v1/responses?user_id={user}", {"input": "let me in"}, headers=bearer(token))
    assert reply.status == 401, (name, reply.body)
    assert reply.headers["www-authenticate"] == "Bearer"
    body = reply.json()
    assert body["detail"] == {"response": "Missing or invalid credentials provided by client", "cause": cause}
    assert body["error"]["type"] == "authentication_error"
    assert [r for r in upstream.requests() if r["method"] != "GET"] == []
    assert token not in gateway.log()
    # One audit line per refusal, naming the module and the cause, never the token.
    assert "module=jwk-token route=POST /v1/responses" in gateway.log()


def test_validation_failures_log_their_reason(gateway):
    gateway.post("/v1/responses", {"input": "x"}, headers=bearer(RSA.sign(claims(iss="https://evil.test"))))
    assert "InvalidIssuerError" in gateway.log()


def test_missing_or_malformed_bearer(gateway):
    for headers, cause in (({}, "No Authorization header found"),
                           ({"Authorization": "Basic abc"}, "No token found in Authorization header")):
        reply = gateway.get("/v1/models", headers=headers)
        assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"
        assert reply.json()["detail"]["cause"] == cause


def test_tokens_without_exp_when_the_operator_accepts_them(gateway_factory, upstream, jwks, gateway):
    """`require_exp: false` accepts a signed token without `exp` (as LCORE does); both it
    and an unset `audience` are start-up warnings saying what they allow."""
    config = {k: v for k, v in jwk_config(jwks.url, require_exp=False).items() if k != "audience"}
    lenient = gateway_factory(upstream.url, authentication={"module": "jwk-token", "jwk_config": config})
    forever = RSA.sign({k: v for k, v in claims(sub="no-exp").items() if k != "exp"})
    assert owner_of(lenient, lenient.post("/v1/responses", {"input": "x"}, headers=bearer(forever))) == "no-exp"
    # Without `audience`, a token minted for another service of the same issuer passes.
    elsewhere = RSA.sign(claims(sub="for-another-service", aud="another-service"))
    assert owner_of(lenient, lenient.post("/v1/responses", {"input": "x"}, headers=bearer(elsewhere))) \
        == "for-another-service"
    audience = ("security: authentication.jwk_config.audience is not set: a token the issuer minted for ANY "
                "other service (any `aud`, or none) is accepted here")
    no_exp = "security: authentication.jwk_config.require_exp: false: a signed token without `exp` never expires"
    assert audience in lenient.log() and no_exp in lenient.log()
    assert audience not in gateway.log() and no_exp not in gateway.log()  # audience set, exp required


def test_probes_need_a_token_without_skip_for_health_probes(gateway):
    assert gateway.get("/liveness").status == 401
    assert gateway.get("/liveness", headers=bearer(RSA.sign(claims()))).json() == {"alive": True}
    assert "skip_for_health_probes: false" in gateway.log()


def test_large_tokens_are_refused_and_never_logged(gateway, upstream):
    upstream.clear()
    # Over max_header_bytes (32 KiB), under the parser's bound (64 KiB): the envelope's 431.
    token = "eyJhbGciOiJSUzI1NiJ9." + "A" * 40_000
    reply = gateway.post("/v1/responses", {"input": "big"}, headers=bearer(token))
    assert reply.status == 431
    assert reply.json()["detail"] == {"response": "Request header fields too large",
                                      "cause": "A request header exceeds the limit of 32768 bytes."}
    # Past the parser's bound: its 400, without a byte of the token in the reply. (A
    # megabyte gets the same 400, but the connection is closed while the client is still
    # sending, so whether the client reads it is up to the kernel: tests/e2e/test_header_limits.py.)
    past = "eyJhbGciOiJSUzI1NiJ9." + "A" * 100_000
    reply = gateway.post("/v1/responses", {"input": "big"}, headers=bearer(past))
    assert reply.status == 400 and "eyJhbGciOiJSUzI1NiJ9" not in reply.body.decode()
    assert reply.json()["detail"] == {"response": "Bad request",
                                      "cause": "The request line or a request header exceeds 65536 bytes."}
    assert upstream.requests() == []
    assert "eyJhbGciOiJSUzI1NiJ9.AAAA" not in gateway.log()
    # A token under the limit but over aiohttp's own 8 KiB default is accepted.
    big = RSA.sign(claims(groups=[f"group-{i:04d}" for i in range(1200)]))
    assert 8192 < len(big) < 32768
    assert gateway.post("/v1/responses", {"input": "many groups"}, headers=bearer(big)).status == 200


def test_kid_flood_is_rate_limited(gateway, jwks):
    time.sleep(3.1)  # whatever fetched before, the next unknown kid may refetch once
    before = jwks.fetches
    started = time.monotonic()
    for _ in range(40):
        token = STRANGER.sign(claims(), kid=uuid.uuid4().hex)
        reply = gateway.post("/v1/responses", {"input": "flood"}, headers=bearer(token))
        assert reply.json()["detail"]["cause"] == "Token signed by unknown key"
    elapsed = time.monotonic() - started
    assert 1 <= jwks.fetches - before <= 1 + int(elapsed / 3)


# -- rotation and a key server that goes away ---------------------------------------


@pytest.fixture(scope="module")
def rotating(gateway_factory, upstream):
    first = SigningKey.rsa("rot-1")
    server = JwksServer(first)
    gateway = gateway_factory(upstream.url, authentication={
        "module": "jwk-token", "skip_for_health_probes": True,
        "jwk_config": jwk_config(server.url, jwks_cache_seconds=1, jwks_refetch_min_seconds=0.5)})
    yield server, gateway, first
    server.close()


def test_key_rotation_without_restart(rotating):
    server, gateway, first = rotating
    old = first.sign(claims())
    assert gateway.get("/v1/models", headers=bearer(old)).status == 200
    second = SigningKey.ec("rot-2")
    server.keys = [second]
    time.sleep(0.6)
    # A token by the new key: its kid is unknown, so the set is fetched again at once.
    assert owner_of(gateway, gateway.post("/v1/responses", {"input": "rotated"},
                                          headers=bearer(second.sign(claims(sub="rotated"))))) == "rotated"
    # The old key is gone from the set: its tokens, even one verified (and cached) before,
    # are refused.
    reply = gateway.get("/v1/models", headers=bearer(old))
    assert reply.status == 401 and reply.json()["detail"]["cause"] == "Token signed by unknown key"
    server.keys = [first, second]


def test_key_server_down_keeps_cached_keys(rotating):
    server, gateway, first = rotating
    time.sleep(0.6)  # the rotation test just refetched: the next unknown kid may refetch again
    assert gateway.get("/v1/models", headers=bearer(first.sign(claims()))).status == 200
    server.server.down()
    try:
        time.sleep(1.2)  # past jwks_cache_seconds: the gateway tries to refetch and cannot
        fresh = first.sign(claims(sub="while-down"))
        assert owner_of(gateway, gateway.post("/v1/responses", {"input": "down"}, headers=bearer(fresh))) \
            == "while-down"
        assert "keeping the" in gateway.log()
    finally:
        server.server.up()


def test_probes_open_without_credentials_when_skipped(rotating):
    _, gateway, _ = rotating
    assert gateway.get("/liveness").json() == {"alive": True}
    assert gateway.get("/readiness").status == 200
    # With a credential, probes authenticate like every endpoint.
    reply = gateway.get("/liveness", headers=bearer("not-a-token"))
    assert reply.status == 401 and reply.json() == {"detail": {
        "response": "Missing or invalid credentials provided by client", "cause": "Token could not be decoded"}}


def test_key_server_down_without_cached_keys(gateway_factory, upstream):
    nowhere = JwksServer()
    nowhere.server.down()
    try:
        gateway = gateway_factory(upstream.url, authentication={"module": "jwk-token",
                                                                "jwk_config": jwk_config(nowhere.url)})
        reply = gateway.post("/v1/responses?user_id=x", {"input": "x"}, headers=bearer(RSA.sign(claims())))
        assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"
        assert reply.json()["detail"]["cause"] == "Unable to reach authentication key server"
        db = GatewayDb.of(gateway)
        assert db.counts() == Counts(conversations=0, turns=0)
    finally:
        nowhere.close()


def test_parser_errors_never_log_the_header(gateway_factory, upstream, jwks):
    """Past the parser's own bound (64 KiB here) aiohttp refuses the request itself: its
    log line must not quote the header."""
    small = gateway_factory(upstream.url, service={"max_header_bytes": 1024, "max_request_body_bytes": 2048},
                            authentication={"module": "jwk-token", "jwk_config": jwk_config(jwks.url)})
    token = "eyJzZWNyZXQtcHJlZml4In0." + "B" * 70_000
    reply = small.get("/v1/models", headers=bearer(token))
    assert reply.status == 400
    assert "eyJzZWNyZXQtcHJlZml4In0" not in small.log()
    assert "refused a malformed request" in small.log() and "LineTooLong" in small.log()
    between = "eyJzZWNyZXQtcHJlZml4In0." + "C" * 1500  # over max_header_bytes, under the parser's bound
    assert small.get("/v1/models", headers=bearer(between)).status == 431
    assert "refused status=431 module=jwk-token route=GET /v1/models" in small.log()


def test_key_server_over_https_with_its_ca(gateway_factory, upstream, tmp_path):
    ca = TestCa(tmp_path / "ca")
    server = JwksServer(RSA, ca=ca)
    try:
        trusting = gateway_factory(upstream.url, authentication={
            "module": "jwk-token", "jwk_config": jwk_config(server.url, ca_cert_path=str(ca.ca_path))})
        assert owner_of(trusting, trusting.post("/v1/responses", {"input": "tls"},
                                                headers=bearer(RSA.sign(claims(sub="over-tls"))))) == "over-tls"
        # Without the CA the server's certificate is not trusted: no keys, so no token passes.
        distrusting = gateway_factory(upstream.url, authentication={"module": "jwk-token",
                                                                    "jwk_config": jwk_config(server.url)})
        reply = distrusting.get("/v1/models", headers=bearer(RSA.sign(claims())))
        assert reply.json()["detail"]["cause"] == "Unable to reach authentication key server"
    finally:
        server.close()


def test_role_rules_over_the_claims_grant_actions(gateway_factory, upstream, jwks):
    """LCORE's role_rules over the verified claims (a list claim, `contains`), and
    access_rules that only those roles satisfy."""
    ruled = gateway_factory(upstream.url, authentication={"module": "jwk-token", "jwk_config": jwk_config(
        jwks.url, jwt_configuration={"user_id_claim": "sub", "username_claim": "preferred_username", "role_rules": [
            {"jsonpath": "$.realm_access.roles[*]", "operator": "contains", "value": "ops", "roles": ["ops"]}]})},
        authorization={"access_rules": [{"role": "*", "actions": ["info"]}, {"role": "ops", "actions": ["get_models"]}]})
    ops = RSA.sign(claims(sub="ops-user", realm_access={"roles": ["ops", "dev"]}))
    dev = RSA.sign(claims(sub="dev-user", realm_access={"roles": ["dev"]}))
    assert ruled.get("/v1/models", headers=bearer(ops)).status == 200
    denied = ruled.get("/v1/models", headers=bearer(dev))
    assert denied.status == 403
    assert denied.json()["detail"]["cause"] == "User dev-user is not authorized to access this endpoint."
    assert ruled.get("/v1/info", headers=bearer(dev)).status == 200


def test_plain_http_key_server_on_another_host_starts_with_a_warning(gateway_factory, upstream, jwks, tmp_path):
    """LCORE's own configurations name `http://mock-jwks:8000/...`: a plain-http key set on
    a host that is not a loopback literal starts, with a `security:` warning naming the
    risk; `require_https: true` keeps the strict rule. The machine's own host name is
    such a host; where it resolves to the loopback (as in most containers) the key
    server below is really reached through it."""
    host = socket.gethostname()
    try:
        reachable = socket.gethostbyname(host).startswith("127.")
    except OSError:
        reachable = False
    url = jwks.url.replace("127.0.0.1", host)
    gateway = gateway_factory(upstream.url, authentication={"module": "jwk-token", "jwk_config": jwk_config(url)})
    if reachable:
        token = RSA.sign(claims(sub="over-plain-http"))
        assert owner_of(gateway, gateway.post("/v1/responses", {"input": "x"}, headers=bearer(token))) \
            == "over-plain-http"
    warning = (f"security: authentication.jwk_config.url {url} is plain http:// to another host: the key set "
               "travels unauthenticated and unencrypted, so anyone on that path can replace the keys and mint "
               "tokens for ANY user")
    assert warning in gateway.log()
    strict = tmp_path / "strict.yaml"
    strict.write_text(json.dumps({"name": "strict", "llama_stack": {"url": upstream.url}, "authentication": {
        "module": "jwk-token", "jwk_config": jwk_config(url, require_https=True)}}))
    refused = subprocess.run([str(GATEWAY_BIN), "serve", "-c", str(strict)], capture_output=True, text=True,
                             timeout=60)
    assert refused.returncode != 0
    assert "must be an https:// URL (http:// only for a loopback address)" in refused.stderr + refused.stdout
