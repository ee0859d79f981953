"""The gateway's main flows against a REAL Llama Stack 0.7.3.

Chain (all real processes on loopback, started once per session):

    scripted upstream (python -m gateway.devserver, Llama Stack's inference backend)
      -> Llama Stack 0.7.3 (.cache/llama-stack/venv, set up by scripts/llama-stack/setup.sh)
        -> `gateway serve` (several, one per tool configuration)
    plus a real MCP server (tests/support/mcp_server.py) the gateways configure.

Without Llama Stack installed the tests skip, unless GATEWAY_REQUIRE_LLAMA_STACK=1 (CI):
then every test errors, so CI can never pass by silently skipping them.

The gateways are configured with `inference: {default_provider: scripted,
default_model: scripted-chat}` because Llama Stack lists `scripted/ghost-model` (a model
the scripted backend does not know) as its first LLM.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import pytest

from tests.support.gateway_proc import Endpoint, Gateway, Upstream, start_upstream
from tests.support.llama_stack import LLAMA_STACK_SKIP_REASON, llama_stack_installed, start_llama_stack
from tests.support.mcp_server import CLIENT_MCP_ON_LOOPBACK, start_mcp_server
from tests.support.processes import Proc, free_port

REQUIRE_ENV = "GATEWAY_REQUIRE_LLAMA_STACK"
CHAT_MODEL = "scripted/scripted-chat"
DEFAULT_MODEL = {"default_provider": "scripted", "default_model": "scripted-chat"}
MCP_TOKEN = "mcp-token-from-file"
HANDBOOK = (b"Gateway handbook.\nThe secret launch code for project Falcon is 7-alpha-9.\n"
            b"Falcon ships in March. The team mascot is a red panda named Ember.\n")


def require_llama_stack() -> None:
    """Skip without Llama Stack, or fail loudly when the environment demands it (CI)."""
    if llama_stack_installed():
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{REQUIRE_ENV}=1 but {LLAMA_STACK_SKIP_REASON}", pytrace=False)
    pytest.skip(LLAMA_STACK_SKIP_REASON)


@dataclass
class Stack:
    """The real Llama Stack, with raw HTTP helpers for checking its state directly."""

    proc: Proc
    endpoint: Endpoint

    @property
    def url(self) -> str:
        return self.proc.url

    def get(self, path: str) -> Any:
        reply = self.endpoint.get(path)
        assert reply.status == 200, (path, reply.status, reply.body)
        return reply.json()

    def conversation_items(self, conversation: str) -> list[dict[str, Any]]:
        """Every item of a Llama Stack conversation in its `order=asc`, which is not reliably
        chronological: each add gives its items created_at = now + index (whole seconds),
        so batches added within seconds of each other interleave. Compare as sets."""
        return self.get(f"/v1/conversations/{conversation}/items?order=asc&limit=100")["data"]

    def newest_response_id(self) -> str | None:
        return self.get("/v1/responses?limit=1")["first_id"]


@dataclass
class Chain:
    scripted: Upstream
    stack: Stack
    mcp: Proc
    gateway: Gateway            # no tools configured
    mcp_gateway: Gateway        # mcp_servers: calc (require_approval never)
    approval_gateway: Gateway   # mcp_servers: calc (require_approval always)


@pytest.fixture(scope="session")
def chain(tmp_path_factory: pytest.TempPathFactory,
          gateway_factory: Callable[..., Gateway]) -> Iterator[Chain]:
    require_llama_stack()
    started = time.monotonic()
    logs = tmp_path_factory.mktemp("e2e-llama-stack")
    with ExitStack() as cleanup:  # stops what was started, in reverse, however the start ends
        scripted = start_upstream(logs / "scripted")
        cleanup.callback(scripted.stop)
        # Llama Stack takes seconds to become healthy; the gateways and the MCP server
        # need nothing from it to start (the gateway probes its upstream on first use),
        # so they start while it boots.
        port = free_port()
        stack_url = f"http://127.0.0.1:{port}"
        booted: dict[str, Any] = {}

        def boot() -> None:
            try:
                booted["proc"] = start_llama_stack(logs / "stack", scripted.url, logs, port=port)
            except BaseException as exc:  # re-raised in the main thread
                booted["error"] = exc

        booting = threading.Thread(target=boot, name="llama-stack-boot", daemon=True)
        booting.start()

        def stop_stack() -> None:
            booting.join()
            if "proc" in booted:
                booted["proc"].stop()

        cleanup.callback(stop_stack)
        mcp = start_mcp_server(logs)
        cleanup.callback(mcp.stop)
        token_file = logs / "calc-token"
        token_file.write_text(MCP_TOKEN + "\n")
        calc = {"name": "calc", "url": mcp.url, "authorization_headers": {"Authorization": str(token_file)},
                "headers": ["X-Tenant"]}
        gateway = gateway_factory(stack_url, keep=True, inference=DEFAULT_MODEL, client_tools=CLIENT_MCP_ON_LOOPBACK)
        mcp_gateway = gateway_factory(stack_url, keep=True, inference=DEFAULT_MODEL, mcp_servers=[calc])
        approval_gateway = gateway_factory(stack_url, keep=True, inference=DEFAULT_MODEL,
                                           mcp_servers=[{**calc, "require_approval": "always"}])
        booting.join()
        if "error" in booted:
            raise booted["error"]
        stack_proc: Proc = booted["proc"]
        print(f"\nchain up in {time.monotonic() - started:.1f} s (Llama Stack at {stack_proc.url}; logs: {logs})")
        yield Chain(scripted=scripted, stack=Stack(stack_proc, Endpoint(stack_proc, port)), mcp=mcp,
                    gateway=gateway, mcp_gateway=mcp_gateway, approval_gateway=approval_gateway)


@pytest.fixture(scope="session")
def stack(chain: Chain) -> Stack:
    return chain.stack


@pytest.fixture(scope="session")
def gw(chain: Chain) -> Gateway:
    return chain.gateway


@dataclass
class Handbook:
    file_id: str
    vector_store_id: str
    gateway: Gateway            # byok_rag: [{rag_id: handbook, vector_db_id: <the store>}]


@pytest.fixture(scope="session")
def handbook(chain: Chain, gateway_factory: Callable[..., Gateway]) -> Handbook:
    """A file and a vector store created directly on Llama Stack, and a gateway whose
    `byok_rag` points at the store."""
    http = chain.stack.endpoint
    boundary = uuid.uuid4().hex
    form = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nassistants\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"handbook.txt\"\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + HANDBOOK + f"\r\n--{boundary}--\r\n".encode()
    uploaded = http.request("POST", "/v1/files", raw=form,
                            headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    assert uploaded.status == 200, uploaded.body
    file_id = uploaded.json()["id"]
    created = http.post("/v1/vector_stores", {"name": "handbook", "file_ids": [file_id]}, timeout=60)
    assert created.status == 200, created.body
    store_id = created.json()["id"]
    deadline = time.monotonic() + 30
    while True:
        state = http.get(f"/v1/vector_stores/{store_id}/files/{file_id}").json()
        if state["status"] == "completed":
            break
        assert state["status"] == "in_progress" and time.monotonic() < deadline, state
        time.sleep(0.05)
    rag_gateway = gateway_factory(chain.stack.url, keep=True, inference=DEFAULT_MODEL,
                                  byok_rag=[{"rag_id": "handbook", "vector_db_id": store_id}])
    return Handbook(file_id=file_id, vector_store_id=store_id, gateway=rag_gateway)
