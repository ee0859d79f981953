"""schemathesis against `gateway serve`'s own `/openapi.json` (issue 42, fuzzing in CI):
every operation the document lists gets a fixed number of generated requests, valid and
invalid, with credentials (an API key), and every answer must be no 5xx and conform to
the document: its status code listed, its content type listed, its body valid against
the listed schema.

Phases: the document's examples, `coverage` (boundary and missing values of every field)
and `fuzzing`. Bounded and deterministic: `--max-examples` per operation is fixed, the generation is
deterministic with a fixed seed (the same requests on every run) and nothing is stored
between runs; no shrinking (a failure names its request: CI needs no minimal one).
schemathesis runs as its own command line (`st run`): its pytest plugin's
`from_fixture` fails under pytest 9 (`'Function' object has no attribute '_nodeid'`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ST = Path(sys.executable).parent / "st"
API_KEY = "schemathesis-key-0001"
# Per operation; 45 operations: a few hundred requests, a real turn each at most.
EXAMPLES = 12
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance")


@pytest.fixture(scope="module", params=["forward", "engine"])
def fuzzed(request: pytest.FixtureRequest, gateway_factory: Any, upstream: Any, chat_upstream: Any,
           tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every feature an operation needs is configured, so that no operation answers only
    "not configured" (the v2 conversations' 500, compaction's 501, feedback's and the
    quota administration's 403): the fuzz reaches each one's own code. The key's role
    is granted `admin` (every action). Both modes: forward (the upstream's Responses
    API) and engine (the gateway's own loop over Chat Completions)."""
    data = tmp_path_factory.mktemp("fuzzed")
    sqlite = {"sqlite": {"db_path": str(data / "gateway.db")}}
    engine = request.param == "engine"
    url = chat_upstream.url if engine else upstream.url
    return gateway_factory(
        url, database=sqlite, **({"llama_stack": {"url": url, "api": "chat_completions"}} if engine else {}),
        authentication={"module": "api-key-token", "api_key_config": {"keys": [
            {"key": API_KEY, "user_id": "fuzzer", "roles": ["fuzz"]}]}},
        authorization={"access_rules": [{"role": "fuzz", "actions": ["admin"]}]},
        quota_handlers={**sqlite, "enable_token_history": True, "limiters": [
            {"name": "daily", "type": "user_limiter", "initial_quota": 10**9, "quota_increase": 0,
             "period": "1 day"},
            {"name": "cluster", "type": "cluster_limiter", "initial_quota": 10**12, "quota_increase": 0,
             "period": "1 day"}]},
        conversation_cache={"type": "sqlite", "sqlite": {"db_path": str(data / "cache.db")}},
        user_data_collection={"feedback_enabled": True, "feedback_storage": str(data / "feedback")},
        response_compaction={"keys": [{"id": "k1", "secret": "fuzz-secret-0123456789abcdefghijklmnopqrstuv"}]})


# ~25 s per mode on 2 cores; the bound is for a machine shared with other runs (measured:
# up to ~3 min per mode under a load of 12), not a budget.
@pytest.mark.timeout(420)
def test_every_operation_answers_as_documented(fuzzed: Any, tmp_path: Path) -> None:
    argv = [str(ST), "run", f"{fuzzed.url}/openapi.json", "--checks", ",".join(CHECKS),
            "--max-examples", str(EXAMPLES), "--seed", "42", "--generation-deterministic",
            "--no-shrink", "--phases", "examples,coverage,fuzzing",
            "--workers", "1", "--request-timeout", "30", "--no-color",
            "--header", f"Authorization: Bearer {API_KEY}"]
    # The scripted upstream has no providers API: the providers' operations answer their
    # documented 501 ("The upstream has no providers API"), which the no-5xx check cannot
    # tell from a failure, and reach no code of theirs past it.
    argv += ["--exclude-operation-id", "list_providers", "--exclude-operation-id", "get_provider"]
    if "chat_completions" not in fuzzed.config_path.read_text():
        # Listing responses is engine mode's (forward mode answers its documented 501,
        # which the no-5xx check cannot tell from a failure): fuzzed in engine mode.
        argv += ["--exclude-operation-id", "list_responses"]
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout[-20000:] + done.stderr[-2000:]
