"""api-key-token through `gateway serve`: LCORE's one key (its default user), per-team
keys (one from a file), LCORE's 401 bodies, and the key never passed on."""

from __future__ import annotations

import pytest

LCORE_KEY = "lcore-shared-key-0001"
TEAM_KEY = "team-a-key-0001"
UNAUTHORIZED = "Missing or invalid credentials provided by client"


@pytest.fixture(scope="module")
def keyed(gateway_factory, upstream, tmp_path_factory):
    key_file = tmp_path_factory.mktemp("keys") / "team-b.key"
    key_file.write_text("team-b-key-from-file\n")
    return gateway_factory(upstream.url, authentication={"module": "api-key-token", "api_key_config": {
        "api_key": LCORE_KEY,
        "keys": [{"key": TEAM_KEY, "user_id": "team-a", "username": "Team A", "roles": ["chat"]},
                 {"key_file": str(key_file), "user_id": "team-b"}]}},
        mcp_servers=[{"name": "kube", "url": "http://127.0.0.1:9/kube",
                      "authorization_headers": {"Authorization": "kubernetes"}}])


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_each_key_is_its_identity(keyed):
    assert keyed.post("/authorized", headers=bearer(LCORE_KEY)).ok() == {
        "user_id": "00000000-0000-0000-0000-000", "username": "lightspeed-user", "skip_userid_check": True}
    assert keyed.post("/authorized?user_id=someone", headers=bearer(TEAM_KEY)).ok() == {
        "user_id": "team-a", "username": "Team A", "skip_userid_check": False}
    assert keyed.post("/authorized", headers=bearer("team-b-key-from-file")).ok()["user_id"] == "team-b"


def test_conversations_belong_to_the_key(keyed):
    mine = keyed.post("/v1/responses", {"input": "hi", "tool_choice": "none"}, headers=bearer(TEAM_KEY)).ok()
    reply = keyed.post("/v1/responses", {"input": "x", "conversation": mine["conversation"]},
                       headers=bearer("team-b-key-from-file"))
    assert reply.status == 403


@pytest.mark.parametrize("path", ["/v1/models", "/v1/info"])
@pytest.mark.parametrize("header, detail", [
    (None, {"response": UNAUTHORIZED, "cause": "No Authorization header found"}),
    ("Basic dGVhbS1hOng=", {"response": UNAUTHORIZED, "cause": "No token found in Authorization header"}),
    ("Bearer team-a-key-0002", "Invalid API Key"),
    (f"Bearer {LCORE_KEY}x", "Invalid API Key"),
])
def test_refusals_are_lcore_401s(keyed, path, header, detail):
    reply = keyed.get(path, headers={} if header is None else {"Authorization": header})
    assert reply.status == 401 and reply.headers["www-authenticate"] == "Bearer"
    body = reply.json()
    assert body["detail"] == detail
    if path == "/v1/models":  # an OpenAI path: OpenAI's error object beside LCORE's detail
        assert body["error"]["type"] == "authentication_error"
    else:
        assert set(body) == {"detail"}
    assert "refused status=401 module=api-key-token" in keyed.log()


def test_the_key_is_never_passed_on(keyed, upstream):
    upstream.clear()
    keyed.post("/v1/responses", {"input": "use your tools"}, headers=bearer(TEAM_KEY)).ok()
    sent = upstream.last()["body"]
    # The `kubernetes` header would be the caller's own token; an API key is not one.
    assert all(tool.get("server_label") != "kube" for tool in sent.get("tools") or [])
    assert TEAM_KEY not in str(upstream.requests())
    assert TEAM_KEY not in keyed.log() and LCORE_KEY not in keyed.log()
