"""Model selection's last step against a real Llama Stack 0.7.3: with no model in the
request, no conversation and no `inference` default, the gateway uses the first `llm`
in Llama Stack's `/v1/models`. What Llama Stack was asked for is read from Llama Stack
itself (its stored response) and from its inference backend (the scripted upstream)."""

from __future__ import annotations

from typing import Callable, Iterator

import pytest

from tests.support.gateway_proc import Endpoint, Gateway
from tests.support.llama_stack import start_llama_stack

from .conftest import CHAT_MODEL, Chain, Stack

pytestmark = pytest.mark.llama_stack


def first_llm(stack: Stack) -> str:
    return next(model["id"] for model in stack.get("/v1/models")["data"]
                if model["custom_metadata"]["model_type"] == "llm")


def backend_models(chain: Chain) -> list[str]:
    """The models Llama Stack asked its inference backend for, since the last clear()."""
    return [request["body"]["model"] for request in chain.scripted.requests("/v1/chat/completions")]


@pytest.fixture(scope="module")
def chat_first_stack(chain: Chain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A second Llama Stack over the same backend, without the ghost model: its first LLM
    is the scripted chat model."""
    logs = tmp_path_factory.mktemp("llama-stack-chat-first")
    proc = start_llama_stack(logs / "stack", chain.scripted.url, logs, ghost_model=False)
    try:
        yield Stack(proc, Endpoint(proc, proc.extra["port"]))
    finally:
        proc.stop()


def test_first_llm_when_nothing_configured(chain, chat_first_stack, gateway_factory: Callable[..., Gateway]):
    assert first_llm(chat_first_stack) == CHAT_MODEL
    gateway = gateway_factory(chat_first_stack.url)  # no inference defaults
    chain.scripted.clear()
    response = gateway.post("/v1/responses", {"input": "pick a model for me"}).ok()
    assert response["output_text"] == "Scripted reply (turn 1, 1 messages): pick a model for me"
    assert chat_first_stack.get(f"/v1/responses/{response['id']}")["model"] == CHAT_MODEL
    assert backend_models(chain) == ["scripted-chat"]


def test_first_llm_is_llama_stacks_first_even_when_its_backend_lacks_it(chain, stack, gateway_factory):
    # Why the other gateways configure a default: the shared Llama Stack lists a model its
    # backend does not know first. The gateway still picks it, and the turn fails there.
    assert first_llm(stack) == "scripted/ghost-model"
    gateway = gateway_factory(stack.url)
    chain.scripted.clear()
    reply = gateway.post("/v1/responses", {"input": "pick a model for me"})
    assert reply.status == 500
    assert backend_models(chain) == ["ghost-model"]
    assert stack.get("/v1/responses?limit=1")["data"][0]["model"] == "scripted/ghost-model"
