"""Run a real Llama Stack 0.7.3 (installed by scripts/llama-stack/setup.sh) for tests.

    from tests.support.llama_stack import llama_stack_installed, start_llama_stack

    if not llama_stack_installed():
        pytest.skip(LLAMA_STACK_SKIP_REASON)
    stack = start_llama_stack(tmp / "stack", upstream_url="http://127.0.0.1:18000",
                              log_dir=tmp / "logs")
    ...  # OpenAI SDK with base_url=stack.url + "/v1"; model "scripted/scripted-chat"
    stack.stop()

The upstream behind Llama Stack is the scripted server (``python -m gateway.devserver``):
``upstream_url`` is its root URL, without ``/v1``. Llama Stack lists the upstream's
models at start-up and names them ``scripted/<upstream id>`` (``scripted/scripted-chat``,
``scripted/scripted-embed``); a bare ``scripted-chat`` is a 404.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from tests.support.processes import ROOT, Proc, free_port, spawn, wait_http

LLAMA_STACK_HOME = ROOT / ".cache" / "llama-stack"
LLAMA_STACK_VENV = LLAMA_STACK_HOME / "venv"
LLAMA_STACK_BIN = LLAMA_STACK_VENV / "bin" / "llama"
TIKTOKEN_CACHE_DIR = LLAMA_STACK_HOME / "tiktoken"
MARKER = LLAMA_STACK_HOME / "installed.ok"
SETUP_SCRIPT = ROOT / "scripts" / "llama-stack" / "setup.sh"
LLAMA_STACK_SKIP_REASON = (
    f"Llama Stack 0.7.3 is not installed in {LLAMA_STACK_VENV}: run scripts/llama-stack/setup.sh"
)
# Time to healthy is ~5 s on an idle machine, ~10 s with a busy second core; CI shares 2.
START_TIMEOUT = 90.0

PROVIDER_ID = "scripted"
CHAT_MODEL = "scripted/scripted-chat"
EMBED_MODEL = "scripted/scripted-embed"


def llama_stack_installed() -> bool:
    """True when setup.sh finished (marker written) and the venv's `llama` CLI exists."""
    return MARKER.is_file() and LLAMA_STACK_BIN.is_file() and TIKTOKEN_CACHE_DIR.is_dir()


def run_config(workdir: Path, upstream_url: str, port: int, ghost_model: bool = True) -> dict:
    """The run config as a dict (see docs: reference llama-stack-0.7.3.md, section 3).

    ghost_model: register `scripted/ghost-model`, which Llama Stack then lists as its
    first LLM; without it the first LLM is the upstream's first, `scripted/scripted-chat`."""
    state = str(Path(workdir).resolve())
    ghost = [{"model_id": "ghost", "provider_id": PROVIDER_ID,
              "provider_model_id": "ghost-model", "model_type": "llm"}] if ghost_model else []
    return {
        "version": 2,
        "distro_name": "gateway-upstream",
        "apis": ["files", "file_processors", "inference", "responses", "tool_runtime",
                 "vector_io"],
        "providers": {
            "inference": [{
                "provider_id": PROVIDER_ID,
                "provider_type": "remote::vllm",
                "config": {"base_url": upstream_url.rstrip("/") + "/v1", "max_tokens": 512},
            }],
            "vector_io": [{
                "provider_id": "faiss",
                "provider_type": "inline::faiss",
                "config": {"persistence": {"namespace": "vector_io::faiss",
                                           "backend": "kv_default"}},
            }],
            "files": [{
                "provider_id": "localfs",
                "provider_type": "inline::localfs",
                "config": {"storage_dir": f"{state}/files",
                           "metadata_store": {"table_name": "files_metadata",
                                              "backend": "sql_default"}},
            }],
            "file_processors": [{"provider_id": "pypdf", "provider_type": "inline::pypdf"}],
            "tool_runtime": [
                {"provider_id": "file-search", "provider_type": "inline::file-search"},
                {"provider_id": "model-context-protocol",
                 "provider_type": "remote::model-context-protocol"},
            ],
            "responses": [{
                "provider_id": "builtin",
                "provider_type": "inline::builtin",
                "config": {"persistence": {
                    "agent_state": {"namespace": "agents", "backend": "kv_default"},
                    "responses": {"table_name": "responses", "backend": "sql_default"},
                }},
            }],
        },
        "storage": {
            "backends": {
                "kv_default": {"type": "kv_sqlite", "db_path": f"{state}/kvstore.db"},
                "sql_default": {"type": "sql_sqlite", "db_path": f"{state}/sql_store.db"},
            },
            "stores": {
                "metadata": {"namespace": "registry", "backend": "kv_default"},
                "inference": {"table_name": "inference_store", "backend": "sql_default"},
                "conversations": {"table_name": "openai_conversations",
                                  "backend": "sql_default"},
                "prompts": {"namespace": "prompts", "backend": "kv_default"},
                "connectors": {"namespace": "connectors", "backend": "kv_default"},
            },
        },
        "registered_resources": {
            "models": [
                {"model_id": "scripted-embed", "provider_id": PROVIDER_ID,
                 "provider_model_id": "scripted-embed", "model_type": "embedding",
                 "metadata": {"embedding_dimension": 384}},
                # Unknown to the upstream (-> upstream-error cases); Llama Stack names it
                # scripted/ghost-model, ignoring model_id.
                *ghost,
            ],
        },
        "server": {"host": "127.0.0.1", "port": port},
        "vector_stores": {
            "default_provider_id": "faiss",
            "default_embedding_model": {"provider_id": PROVIDER_ID,
                                        "model_id": "scripted-embed"},
        },
    }


def write_run_config(workdir: Path, upstream_url: str, port: int, ghost_model: bool = True) -> Path:
    """Write workdir/run.yaml (sqlite state and files under workdir) and return its path."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "run.yaml"
    path.write_text(yaml.safe_dump(run_config(workdir, upstream_url, port, ghost_model), sort_keys=False))
    return path


def llama_stack_env() -> dict[str, str]:
    """Environment for `llama stack run`: offline, tiktoken from the cache, no host venv leaks."""
    return {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TIKTOKEN_CACHE_DIR": str(TIKTOKEN_CACHE_DIR),
        "VIRTUAL_ENV": str(LLAMA_STACK_VENV),
        "PATH": f"{LLAMA_STACK_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}",
        "PYTHONPATH": "",
        "PYTHONNOUSERSITE": "1",
    }


def start_llama_stack(workdir: Path, upstream_url: str, log_dir: Path,
                      port: int | None = None, timeout: float = START_TIMEOUT,
                      ghost_model: bool = True) -> Proc:
    """Start `llama stack run` on 127.0.0.1 and wait for GET /v1/health == 200.

    upstream_url: root URL of the scripted upstream (``http://127.0.0.1:N``, no /v1); it
    must already be up, since Llama Stack lists its models at start-up.
    Returns a Proc with ``.url == "http://127.0.0.1:PORT"``; ``.extra`` has ``port``,
    ``workdir`` and ``run_config``. Output goes to ``log_dir/llama-stack.log``.
    Call ``.stop()`` when done. ``ghost_model``: see :func:`run_config`.
    """
    if not llama_stack_installed():
        raise RuntimeError(LLAMA_STACK_SKIP_REASON)
    workdir = Path(workdir)
    port = port or free_port()
    config = write_run_config(workdir, upstream_url, port, ghost_model)
    proc = spawn("llama-stack",
                 [str(LLAMA_STACK_BIN), "stack", "run", str(config), "--port", str(port)],
                 Path(log_dir), env=llama_stack_env(), cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    wait_http(proc, url + "/v1/health", timeout=timeout, ok=lambda status: status == 200)
    proc.url = url
    proc.extra.update(port=port, workdir=workdir, run_config=config)
    return proc
