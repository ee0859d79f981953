"""Audit lines name users as the access line does (issue 39), through `gateway serve`:
a refusal's line (its `user` and its cause) and a quota change's (`admin`, `subject`)
carry the keyed HMAC-SHA-256 of the id (`OTEL_ANONYMIZATION_SECRET`), as many hex digits
as the access line of the configured format shows, never the raw id, unless
`service.audit_user_ids: raw` asks for the ids themselves."""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import pytest

from tests.e2e.test_quotas import CLUSTER, DAILY, HI

SECRET = "audit-hash-key"
# Ids no other line of the log could contain by chance.
ALICE, BOB, ROOT = "alice-u7f3e91", "bob-u2c6d40", "root-u9b1a85"
KEYS = {ALICE: "alice-audit-key-1", BOB: "bob-audit-key-1", ROOT: "root-audit-key-1"}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def hashed(user_id: str) -> str:
    return hmac.new(SECRET.encode(), user_id.encode(), hashlib.sha256).hexdigest()


def start(gateway_factory, upstream, tmp_path_factory, **service):
    return gateway_factory(
        upstream.url, env={"OTEL_ANONYMIZATION_SECRET": SECRET},
        service={"access_log": True, "access_log_format": "json", **service},
        quota_handlers={"sqlite": {"db_path": str(tmp_path_factory.mktemp("audit-quota") / "quota.db")},
                        "limiters": [DAILY, CLUSTER]},
        authentication={"module": "api-key-token", "api_key_config": {"keys": [
            {"key": KEYS[ALICE], "user_id": ALICE, "roles": ["chat"]},
            {"key": KEYS[BOB], "user_id": BOB, "roles": ["chat"]},
            {"key": KEYS[ROOT], "user_id": ROOT, "roles": ["root"]}]}},
        authorization={"access_rules": [{"role": "chat", "actions": ["responses", "get_conversation"]},
                                        {"role": "root", "actions": ["admin"]}]})


def audited(gateway) -> dict[str, str]:
    """The audit lines this scenario makes, by kind: a 403 for the route, a 403 for
    another user's conversation, and a change of a user's balance."""
    turn = gateway.post("/v1/responses", HI, headers=auth(ALICE)).ok()
    assert gateway.get("/v1/models", headers=auth(ALICE)).status == 403
    conversation = turn["conversation"]
    refused = gateway.get(f"/v1/conversations/{conversation}", headers=auth(BOB))
    assert refused.status == 403, refused.body
    # The body is LCORE's, with the id: the caller's own.
    assert refused.json()["detail"]["cause"].startswith(f"User {BOB} does not have permission")
    gateway.request("PUT", f"/v1/quotas/users/{ALICE}", {"limiters": {"daily": 5}}, headers=auth(ROOT)).ok()
    log = gateway.log()
    lines = {
        "route": [line for line in log.splitlines() if "refused status=403" in line and "GET /v1/models" in line],
        "conversation": [line for line in log.splitlines() if "refused status=403" in line
                         and "/v1/conversations/" in line],
        "quota": [line for line in log.splitlines() if "quota change admin=" in line],
    }
    assert all(len(found) == 1 for found in lines.values()), lines
    return {kind: found[0] for kind, found in lines.items()}


def access_users(gateway) -> set[str]:
    return {json.loads(line)["user"] for line in gateway.log().splitlines()
            if line.startswith("{") and '"type":"access"' in line and json.loads(line)["user"]}


@pytest.mark.parametrize("fmt, width", [("json", 64), ("text", 16)])
def test_audit_lines_carry_the_access_lines_hash(gateway_factory, upstream, tmp_path_factory, fmt, width):
    gateway = start(gateway_factory, upstream, tmp_path_factory, access_log_format=fmt)
    lines = audited(gateway)
    alice, bob, root = (hashed(user)[:width] for user in (ALICE, BOB, ROOT))
    assert f" user={alice} cause='User {alice} is not authorized to access this endpoint.'" in lines["route"]
    assert f" user={bob} cause='User {bob} does not have permission to read conversation" in lines["conversation"]
    assert f"quota change admin={root} subject=user:{alice} limiter=daily set=5" in lines["quota"]
    # No raw id in any line of the log, access lines included.
    log = gateway.log()
    assert not re.search("|".join((ALICE, BOB, ROOT)), log)
    if fmt == "json":   # the same name for the same user as the access line's
        assert {hashed(ALICE), hashed(BOB), hashed(ROOT)} <= access_users(gateway)
    else:
        assert f"user={alice} " in log and re.search(rf"GET /v1/models 403 .* user={alice}", log)


def test_raw_ids_when_the_operator_asks(gateway_factory, upstream, tmp_path_factory):
    gateway = start(gateway_factory, upstream, tmp_path_factory, audit_user_ids="raw")
    lines = audited(gateway)
    assert f" user={ALICE} cause='User {ALICE} is not authorized to access this endpoint.'" in lines["route"]
    assert f" user={BOB} cause='User {BOB} does not have permission to read conversation" in lines["conversation"]
    assert f"quota change admin={ROOT} subject=user:{ALICE} limiter=daily set=5" in lines["quota"]
    # The access line keeps the hash: the key is the audit lines'.
    assert hashed(ALICE) in access_users(gateway)
    assert not any(ALICE in line for line in gateway.log().splitlines() if '"type":"access"' in line)


def test_a_refusal_naming_nobody_has_no_user(gateway_factory, upstream, tmp_path_factory):
    gateway = start(gateway_factory, upstream, tmp_path_factory)
    assert gateway.get("/v1/models", headers={"Authorization": "Bearer not-a-key"}).status == 401
    assert "refused status=401 module=api-key-token route=GET /v1/models client=127.0.0.1" in gateway.log()
    assert re.search(r"refused status=401 .* user=None cause='Invalid API Key'", gateway.log())
