"""`rh-identity` through `gateway serve`: every status and body LCORE gives (plain-string
`detail`), the three identity types, entitlements, and the probe flag keyed on the
module's own header."""

from __future__ import annotations

import base64
import json

import pytest

from tests.support.auth_peers import owner_of

ENTITLED = {"rhel": {"is_entitled": True, "is_trial": False}, "ansible": {"is_entitled": True}}
USER = {"type": "User", "org_id": "321", "account_number": "123",
        "user": {"user_id": "u-42", "username": "jdoe", "is_org_admin": False}}
SYSTEM = {"type": "System", "org_id": "321", "account_number": "123", "system": {"cn": "c87dcb4c-system"}}
SYSTEM_NO_ACCOUNT = {"type": "System", "org_id": "321", "account_number": "", "system": {"cn": "cn-free"}}
SERVICE_ACCOUNT = {"type": "ServiceAccount", "org_id": "321",
                   "service_account": {"client_id": "client-7", "username": "service-account-7"}}


def encode(document) -> str:
    text = document if isinstance(document, str) else json.dumps(document)
    return base64.b64encode(text.encode()).decode()


def header(identity: dict, entitlements: dict | None = None) -> dict[str, str]:
    return {"x-rh-identity": encode({"identity": identity, "entitlements": ENTITLED if entitlements is None
                                     else entitlements})}


@pytest.fixture(scope="module")
def rh(gateway_factory, upstream):
    return gateway_factory(upstream.url, authentication={
        "module": "rh-identity", "skip_for_health_probes": True,
        "rh_identity_config": {"required_entitlements": ["rhel", "ansible"], "max_header_size": 2048}},
        mcp_servers=[{"name": "kube", "url": "http://127.0.0.1:9/kube",
                      "authorization_headers": {"Authorization": "kubernetes"}}])


@pytest.mark.parametrize("identity, user_id", [
    (USER, "u-42"), (SYSTEM, "c87dcb4c-system"), (SYSTEM_NO_ACCOUNT, "cn-free"), (SERVICE_ACCOUNT, "client-7"),
])
def test_identity_types(rh, upstream, identity, user_id):
    upstream.clear()
    assert owner_of(rh, rh.post("/v1/responses", {"input": "hi"}, headers=header(identity))) == user_id
    # No bearer of the user's: a `kubernetes` MCP server gets nothing and is skipped.
    assert "kube" not in {tool.get("server_label") for tool in upstream.last()["body"].get("tools", [])}


def _without(section: str, field: str) -> dict:
    identity = json.loads(json.dumps(USER if section == "user" else SERVICE_ACCOUNT))
    del identity[section][field]
    return identity


INVALID = "Invalid identity data"
CASES = [
    ("no header", {}, 401, "Missing x-rh-identity header"),
    ("empty header", {"x-rh-identity": ""}, 401, "Missing x-rh-identity header"),
    ("too large", {"x-rh-identity": "A" * 2049}, 400, "x-rh-identity header exceeds maximum allowed size"),
    ("not base64", {"x-rh-identity": "not base64!"}, 400, "Invalid base64 encoding in x-rh-identity header"),
    ("not utf-8", {"x-rh-identity": base64.b64encode(b"\xff\xfe").decode()}, 400,
     "Invalid base64 encoding in x-rh-identity header"),
    ("not JSON", {"x-rh-identity": encode("{nope")}, 400, "Invalid JSON in x-rh-identity header"),
    ("not an object", {"x-rh-identity": encode("[1, 2]")}, 400, INVALID),
    ("no identity", {"x-rh-identity": encode({"entitlements": ENTITLED})}, 400, INVALID),
    ("no type", header({"org_id": "1", "user": USER["user"]}), 400, INVALID),
    ("unsupported type", header({**USER, "type": "Robot"}), 400, INVALID),
    ("User without user", header({"type": "User", "org_id": "1"}), 400, INVALID),
    ("User without user_id", header(_without("user", "user_id")), 400, INVALID),
    ("User without username", header(_without("user", "username")), 400, INVALID),
    ("user_id not a string", header({**USER, "user": {"user_id": 42, "username": "x"}}), 400, INVALID),
    ("user_id blank", header({**USER, "user": {"user_id": "  ", "username": "x"}}), 400, INVALID),
    ("user_id with a control character", header({**USER, "user": {"user_id": "a\nb", "username": "x"}}), 400,
     INVALID),
    ("user_id too long", header({**USER, "user": {"user_id": "x" * 257, "username": "x"}}), 400, INVALID),
    ("System without cn", header({**SYSTEM, "system": {}}), 400, INVALID),
    ("System without org_id", header({k: v for k, v in SYSTEM.items() if k != "org_id"}), 400, INVALID),
    ("ServiceAccount without client_id", header(_without("service_account", "client_id")), 400, INVALID),
    ("org_id not a string", header({**USER, "org_id": 321}), 400, INVALID),
    ("missing entitlement", header(USER, {"rhel": {"is_entitled": True}}), 403, "Insufficient entitlements"),
    ("entitlement not granted", header(USER, {**ENTITLED, "ansible": {"is_entitled": False}}), 403,
     "Insufficient entitlements"),
    ("no entitlements", {"x-rh-identity": encode({"identity": USER})}, 403, "Insufficient entitlements"),
]


@pytest.mark.parametrize("name, headers, status, detail", CASES, ids=[case[0] for case in CASES])
def test_refusals_are_lcore_bodies(rh, upstream, name, headers, status, detail):
    upstream.clear()
    for path in ("/v1/responses", "/v1/info"):
        reply = rh.request("POST" if path == "/v1/responses" else "GET", path,
                           {"input": "hi"} if path == "/v1/responses" else None, headers=headers)
        assert reply.status == status, (name, reply.body)
        body = reply.json()
        assert body["detail"] == detail
        if path == "/v1/info":
            assert set(body) == {"detail"}  # LCORE's exact body where only LCORE clients call
        if status == 401:
            assert reply.headers["www-authenticate"] == "Bearer"
    assert upstream.requests() == []


def test_probes_skip_on_the_modules_own_header(rh):
    assert rh.get("/liveness").json() == {"alive": True}
    assert rh.get("/liveness", headers={"x-rh-identity": "garbage!"}).status == 400
    assert "only behind a proxy that sets it and strips any client copy" in rh.log()
