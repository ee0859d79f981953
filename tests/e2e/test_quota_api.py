"""The quota API through `gateway serve` (LCORE issue #542): a caller's own balances,
an admin's view and changes of a user's and the cluster's balances (each audited in the
log), idempotent increments, the usage report from the token history, and the same
routes refused without `admin`."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from tests.e2e.test_quotas import CLUSTER, DAILY, ENGINES, HI, MONTHLY, QuotaGateway, usage_of

KEYS = {"root": "root-quota-key-1", "alice": "alice-quota-key-1"}


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def start_api(gateway_factory, upstream, storage: dict):
    return gateway_factory(
        upstream.url, database=storage,
        quota_handlers={**storage, "limiters": [DAILY, MONTHLY, CLUSTER], "enable_token_history": True},
        authentication={"module": "api-key-token", "api_key_config": {"keys": [
            {"key": KEYS["root"], "user_id": "root", "roles": ["root"]},
            {"key": KEYS["alice"], "user_id": "alice", "roles": ["chat"]}]}},
        authorization={"access_rules": [{"role": "chat", "actions": ["responses"]},
                                        {"role": "root", "actions": ["admin"]}]})


@pytest.fixture(scope="module")
def api(gateway_factory, upstream, tmp_path_factory):
    return start_api(gateway_factory, upstream,
                     {"sqlite": {"db_path": str(tmp_path_factory.mktemp("quota-api") / "gateway.db")}})


def test_own_balances_and_admin_changes(api):
    turn = api.post("/v1/responses", HI, headers=auth("alice")).ok()
    spent = usage_of(turn)
    own = api.get("/v1/quotas", headers=auth("alice")).ok()
    assert own["enforced"] is True and own["subject"] == "alice"
    assert own["available_quotas"] == turn["available_quotas"] == {
        "daily": 10000 - spent, "monthly": 50000 - spent, "cluster": 1000000 - spent}
    assert [(entry["name"], entry["type"], entry["reserved"]) for entry in own["limiters"]] == [
        ("daily", "user_limiter", 0), ("monthly", "user_limiter", 0), ("cluster", "cluster_limiter", 0)]
    assert own["limiters"][1]["replenish"] == "reset" and own["limiters"][0]["period"] == "1 day"

    # An admin sees and sets a user's balances; the user's next turn is admitted against them.
    assert api.get("/v1/quotas/users/alice", headers=auth("root")).ok()["available_quotas"] == {
        "daily": 10000 - spent, "monthly": 50000 - spent}
    changed = api.request("PUT", "/v1/quotas/users/alice", {"limiters": {"daily": 5}}, headers=auth("root")).ok()
    assert changed["available_quotas"] == {"daily": 5, "monthly": 50000 - spent}
    refused = api.post("/v1/responses", HI, headers=auth("alice"))
    assert refused.status == 429
    assert refused.json()["detail"]["cause"] == "User alice has 5 tokens, but 100 tokens are needed"

    # Increments: idempotent with the client's key.
    add = {"limiters": {"daily": 1000}}
    first = api.post("/v1/quotas/users/alice/increments", add, headers={**auth("root"), "Idempotency-Key": "k-1"})
    assert first.ok()["applied"] is True and first.json()["available_quotas"]["daily"] == 1005
    again = api.post("/v1/quotas/users/alice/increments", add, headers={**auth("root"), "Idempotency-Key": "k-1"})
    assert again.ok()["applied"] is False and again.json()["available_quotas"]["daily"] == 1005
    other = api.post("/v1/quotas/users/alice/increments", add, headers={**auth("root"), "Idempotency-Key": "k-2"})
    assert other.ok()["available_quotas"]["daily"] == 2005
    # The same key for another subject is another increment.
    cluster = api.post("/v1/quotas/cluster/increments", {"limiters": {"cluster": 10}},
                       headers={**auth("root"), "Idempotency-Key": "k-1"}).ok()
    assert cluster["applied"] is True and cluster["available_quotas"] == {"cluster": 1000000 - spent + 10}
    assert api.request("PUT", "/v1/quotas/cluster", {"limiters": {"cluster": 777}},
                       headers=auth("root")).ok()["available_quotas"] == {"cluster": 777}
    admitted = api.post("/v1/responses", HI, headers=auth("alice")).ok()
    assert admitted["available_quotas"]["cluster"] == 777 - usage_of(admitted)

    # Users named by the access line's hash (tests/e2e/test_audit_user_ids.py: which one).
    log = api.log()
    user = r"[0-9a-f]{64}"
    assert re.search(rf"quota change admin={user} subject=user:{user} limiter=daily set=5 key=None applied=True", log)
    assert re.search(rf"quota change admin={user} subject=user:{user} limiter=daily add=1000 key='k-1' "
                     "applied=False", log)
    assert re.search(rf"quota change admin={user} subject=cluster limiter=cluster set=777", log)
    assert "admin=root" not in log and "user:alice" not in log
    assert KEYS["root"] not in log


@pytest.mark.parametrize("path, body, headers, status, cause", [
    ("/v1/quotas/users/alice/increments", {"limiters": {"daily": 5}}, {}, 400, "An Idempotency-Key header is required"),
    ("/v1/quotas/users/alice/increments", {"limiters": {"daily": 0}}, {"Idempotency-Key": "z"}, 422,
     "limiters.daily: an increment must be positive"),
    ("/v1/quotas/users/alice/increments", {"limiters": {"cluster": 5}}, {"Idempotency-Key": "z"}, 422,
     "No user limiter is named 'cluster' (configured: daily, monthly)"),
    ("/v1/quotas/cluster/increments", {"limiters": {"cluster": 5}, "extra": 1}, {"Idempotency-Key": "z"}, 422, None),
])
def test_bad_changes_are_refused_and_change_nothing(api, path, body, headers, status, cause):
    before = api.get("/v1/quotas/users/alice", headers=auth("root")).ok()
    reply = api.post(path, body, headers={**auth("root"), **headers})
    assert reply.status == status, reply.body
    if cause is not None:
        detail = reply.json()["detail"]
        assert (detail if isinstance(detail, str) else detail["cause"]).startswith(cause)
    assert api.get("/v1/quotas/users/alice", headers=auth("root")).ok() == before


BIGINT_MAX = 2**63 - 1


@pytest.mark.parametrize("engine", ENGINES)
def test_balances_stay_signed_64_bit_integers(gateway_factory, upstream, tmp_path, request, engine):
    """A change whose balance would leave a signed 64-bit integer is a 422, decided in
    the change's transaction: today two increments of 2^63-1 turned SQLite's column into
    a REAL (PostgreSQL: a 500) while the process kept the exact value."""
    postgres = request.getfixturevalue("postgres") if engine == "postgres" else None
    storage = {"postgres": postgres.new_database()} if postgres else \
        {"sqlite": {"db_path": str(tmp_path / "gateway.db")}}
    api = start_api(gateway_factory, upstream, storage)
    stored = QuotaGateway(api, engine, storage, postgres)
    root = auth("root")

    def increment(tokens: int, key: str):
        return api.post("/v1/quotas/users/bo/increments", {"limiters": {"daily": tokens}},
                        headers={**root, "Idempotency-Key": key})

    def column() -> list:
        return stored.sql("SELECT available FROM gateway_quota_balances WHERE limiter = 'daily' AND subject = 'bo'")

    cause = f"limiters.daily: the balance would exceed {BIGINT_MAX} (a signed 64-bit integer)"
    assert api.request("PUT", "/v1/quotas/users/bo", {"limiters": {"daily": 0}}, headers=root).ok()
    assert increment(BIGINT_MAX, "first").ok()["available_quotas"]["daily"] == BIGINT_MAX
    for tokens, key in ((BIGINT_MAX, "second"), (1, "one-more")):
        refused = increment(tokens, key)
        assert refused.status == 422, refused.body
        assert refused.json()["detail"] == {"response": "Invalid attribute value", "cause": cause}
        # The key was not spent: the change's transaction rolled back with it.
        assert increment(tokens, key).status == 422
    for value in (BIGINT_MAX + 1, 2**64 - 1):
        refused = api.request("PUT", "/v1/quotas/users/bo", {"limiters": {"daily": value}}, headers=root)
        assert refused.status == 422 and refused.json()["detail"]["cause"] == cause
    # The stored balance is still the exact integer, as the API and the next turn see it.
    assert column() == [[BIGINT_MAX]]
    assert api.get("/v1/quotas/users/bo", headers=root).ok()["available_quotas"]["daily"] == BIGINT_MAX
    if engine == "sqlite":
        assert stored.sql("SELECT typeof(available) FROM gateway_quota_balances WHERE limiter = 'daily' "
                          "AND subject = 'bo'") == [["integer"]]
    assert api.request("PUT", "/v1/quotas/users/bo", {"limiters": {"daily": BIGINT_MAX}},
                       headers=root).ok()["available_quotas"]["daily"] == BIGINT_MAX
    assert "Traceback" not in api.log()


def test_usage_report_from_the_token_history(api):
    spent = [api.post("/v1/responses", {**HI, "input": f"usage {n}"}, headers=auth("alice")) for n in range(2)]
    report = api.get("/v1/quotas/usage?user_id=alice", headers=auth("root")).ok()
    today = datetime.now(timezone.utc).date().isoformat()
    assert report["end"] == today
    (row,) = report["usage"]
    # The provider as the upstream's catalog names it (none for this model).
    assert (row["user_id"], row["provider"], row["model"], row["last_day"]) == ("alice", "", "scripted-chat", today)
    assert row["total_tokens"] == row["input_tokens"] + row["output_tokens"] >= sum(
        usage_of(reply.json()) for reply in spent if reply.status == 200)
    assert api.get("/v1/quotas/usage?start=2020-01-01&end=2020-01-31", headers=auth("root")).ok()["usage"] == []
    assert api.get("/v1/quotas/usage?start=yesterday", headers=auth("root")).status == 422


@pytest.mark.parametrize("method, path", [
    ("GET", "/v1/quotas/users/root"), ("PUT", "/v1/quotas/users/alice"), ("POST", "/v1/quotas/users/alice/increments"),
    ("GET", "/v1/quotas/cluster"), ("PUT", "/v1/quotas/cluster"), ("POST", "/v1/quotas/cluster/increments"),
    ("GET", "/v1/quotas/usage"),
])
def test_admin_routes_need_admin(api, method, path):
    reply = api.request(method, path, {"limiters": {"daily": 1}}, headers={**auth("alice"), "Idempotency-Key": "x"})
    assert reply.status == 403
    assert reply.json()["detail"]["cause"] == "User alice is not authorized to access this endpoint."
