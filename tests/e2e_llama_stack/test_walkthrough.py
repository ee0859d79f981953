"""docs/llama-stack.md, step by step, against the real Llama Stack: each step's
configuration is read from the page itself (its ```yaml blocks headed
`# lightspeed-stack.yaml, step N`), pointed at this session's Llama Stack and model and a
temporary folder, run with `gateway serve`, and checked as the page says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from tests.e2e_llama_stack.conftest import CHAT_MODEL
from tests.support.gateway_proc import Gateway, start_gateway

PAGE = Path(__file__).resolve().parents[2] / "docs" / "llama-stack.md"
KEY = "walkthrough-team-a-key-0123456789abcdef"


def steps() -> dict[int, dict[str, Any]]:
    blocks = re.findall(r"```yaml\n# lightspeed-stack\.yaml, step (\d)[^\n]*\n(.*?)```", PAGE.read_text(), re.S)
    return {int(number): yaml.safe_load(body) for number, body in blocks}


def configured(step: int, stack_url: str, folder: Path) -> dict[str, Any]:
    """The page's configuration after `step`: step 1, then each later block replacing or
    adding its top-level keys, as the page says; the Llama Stack, model and files ours."""
    config: dict[str, Any] = {}
    for number in range(1, step + 1):
        config.update(steps()[number])
    text = yaml.safe_dump(config)
    provider, model = CHAT_MODEL.split("/")
    text = (text.replace("http://localhost:8321", stack_url).replace("./gateway.db", str(folder / "gateway.db"))
            .replace("my-provider", provider).replace("my-model", model))
    return yaml.safe_load(text)


def serve(step: int, stack_url: str, folder: Path) -> Gateway:
    return start_gateway(folder, configured(step, stack_url, folder), env={"TEAM_A_KEY": KEY})


def test_the_page_has_its_three_steps():
    assert sorted(steps()) == [1, 2, 3]
    assert steps()[1]["llama_stack"]["url"] == "http://localhost:8321"


def test_step_1_the_gateway_answers_from_the_llama_stack(stack, tmp_path):
    gateway = serve(1, stack.url, tmp_path)
    try:
        ready = gateway.get("/readiness")
        assert ready.status == 200 and ready.json()["ready"] is True
        info = gateway.get("/v1/info").json()
        assert info["name"] == "my gateway" and info["llama_stack_version"] == "0.7.3"
        reply = gateway.post("/v1/responses", {"input": "Hello"})
        assert reply.status == 200, reply.text
        assert reply.json()["model"] == CHAT_MODEL.split("/")[1] and reply.json()["conversation"]   # "my-model"
    finally:
        gateway.stop()


def test_step_2_authentication(stack, tmp_path):
    gateway = serve(2, stack.url, tmp_path)
    try:
        assert gateway.post("/v1/responses", {"input": "Hi"}).status == 401
        assert gateway.get("/readiness").status == 200   # skip_for_health_probes
        reply = gateway.post("/v1/responses", {"input": "Hi"}, headers={"Authorization": f"Bearer {KEY}"})
        assert reply.status == 200, reply.text
        assert gateway.post("/authorized", None, headers={"Authorization": f"Bearer {KEY}"}).json()["user_id"] \
            == "team-a"
    finally:
        gateway.stop()


def test_step_3_a_token_quota(stack, tmp_path):
    gateway = serve(3, stack.url, tmp_path)
    auth = {"Authorization": f"Bearer {KEY}"}
    try:
        quotas = gateway.get("/v1/quotas", headers=auth).json()
        assert quotas["enforced"] is True and quotas["subject"] == "team-a"
        assert quotas["available_quotas"] == {"daily": 20000}
        reply = gateway.post("/v1/responses", {"input": "Hi"}, headers=auth)
        assert reply.status == 200, reply.text
        usage = reply.json()["usage"]
        left = gateway.get("/v1/quotas", headers=auth).json()["available_quotas"]["daily"]
        assert 0 < left < 20000 and 20000 - left >= usage["total_tokens"]
    finally:
        gateway.stop()

