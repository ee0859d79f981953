"""`tests/` mirrors `gateway/` file by file (docs/development.md, "Where a test goes"):
the unit tests of `gateway/<pkg>/<module>.py` are `tests/<pkg>/test_<module>.py` (of
`gateway/<module>.py`, `tests/test_<module>.py`; of a package's `__init__.py`,
`tests/<pkg>/test_<pkg>.py`). Behaviour through `gateway serve` lives in `tests/e2e/`.

Two lists, each entry with its reason, hold the exceptions: test files that are not one
module's unit tests (`CROSS_MODULE`), and modules with logic but no unit file
(`WITHOUT_UNIT_FILE`). A module that only re-exports (docstring, imports, `__all__`) needs
no unit file. A stale entry (the file now exists, or is gone) fails too, so the lists stay
short and true."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GATEWAY = ROOT / "gateway"
TESTS = ROOT / "tests"

# Folders of tests/ that are not unit tests of gateway/ modules.
NOT_UNIT = {
    "e2e": "behaviour through `gateway serve` over real sockets",
    "e2e_llama_stack": "behaviour against a real Llama Stack",
    "support": "the suite's fixtures (processes, peers, clients)",
    "support_smoke": "smoke tests of the suite's own peers",
    "fixtures": "recorded bytes and the scripts that recorded them",
    "grafana": "the dashboards and alerts of grafana/, not gateway/",
    "bench": "the benchmark's own helpers (bench/, not gateway/)",
    "deploy": "deploy/ and the Dockerfile, not gateway/",
}

# Test files (paths under tests/) that are not the unit tests of one module.
CROSS_MODULE: dict[str, str] = {
    "test_imports.py": "the import graph of all of gateway/ (no circles, layers point down)",
    "test_lint.py": "ruff over gateway/, bench/ and tests/",
    "test_typecheck.py": "mypy --strict over gateway/",
    "test_layout.py": "this file: the layout of tests/ itself",
    "test_packaging.py": "the wheel and the `gateway` command the Dockerfile installs",
    "test_startup_imports.py": "which modules a started gateway loads, through `gateway serve`",
    "test_log_secret_scan.py": "the suite's own scan of the gateways' logs (tests/conftest.py)",
    "devserver/test_against_llama_stack.py": "the scripted upstream against a real Llama Stack, byte for byte",
    "devserver/test_openai_sdk.py": "the openai SDK against the scripted upstream, every endpoint it serves",
    "devserver/test_responses_fixtures.py": "the scripted upstream against recorded Llama Stack bytes "
                                            "(responses.py, stream.py, shapes.py together)",
    "observability/test_access_log_e2e.py": "the access line through `gateway serve` (e2e, beside its unit file)",
    "observability/test_tracing_e2e.py": "traces through `gateway serve` to an OTLP receiver (e2e, beside its "
                                         "unit file)",
    "quota/test_batches.py": "quota work batched with the turn writer: admission.py, store.py's charge "
                             "statements, storage/batch.py",
    "sdk/test_approvals.py": "the SDK's MCP approvals through `gateway serve` (agent.py, drive.py, loop.py)",
    "sdk/test_docs.py": "docs/sdk.md's example run against `gateway demo`",
    "sdk/test_isolation.py": "importing gateway.sdk loads no server module",
    "sdk/test_server_tools.py": "server-side and configured tools through the SDK and `gateway serve`",
    "sdk/test_state.py": "the agent's state guards through `gateway serve` (agent.py, drive.py, errors.py)",
    "sdk/test_stream.py": "streamed runs through `gateway serve` (agent.py, drive.py, results.py)",
    "streaming/test_instruction_budget.py": "the rewriter's cost per event, counted by callgrind (bench/)",
    "streaming/test_replay.py": "recorded Llama Stack streams through repair, enrich and framing together",
    "turns/test_life.py": "a turn's whole life with fakes: prepare.py, run.py, settle.py and hooks.py together "
                          "(other files of tests/turns/ reuse its fakes)",
}

# Reasons shared by several modules below.
_SECTION = "a configuration section: validated with the whole configuration in config/test_config.py"
_GLUE = "wiring, no logic of its own: every test that starts the gateway runs it"
_HANDLER = "an aiohttp handler over the services, tested end to end: "
_WIRE = "pydantic wire models: their validation is tested through the endpoints that use them, "

# Modules (paths under gateway/) with logic and no unit file.
WITHOUT_UNIT_FILE: dict[str, str] = {
    "__main__.py": "the `gateway` command's argument parsing: tests/e2e/test_cli.py",
    "app.py": _GLUE,
    "demo.py": "`gateway demo`: tests/e2e/test_cli.py and sdk/test_docs.py",
    "outbound.py": "the hook point for outbound tracing: observability/test_tracing_e2e.py",
    "request_scope.py": "one context variable",
    "config/base.py": _SECTION,
    "config/customization.py": _SECTION,
    "config/database.py": _SECTION,
    "config/inference.py": _SECTION,
    "config/llama_stack.py": _SECTION,
    "config/observability.py": _SECTION,
    "config/quota.py": _SECTION + " and quota/test_balances.py",
    "config/rlsapi.py": "three keys without validators; read by legacy/infer.py (legacy/test_infer.py)",
    "config/service.py": _SECTION + " and schema/test_limits.py",
    "config/websocket.py": "a configuration section: tests/e2e/test_websocket.py",
    "devserver/__main__.py": "the scripted upstream's command line: every e2e test starts it",
    "devserver/shapes.py": "the stand-in's JSON shapes: devserver/test_responses_fixtures.py compares them with "
                           "recorded bytes",
    "devserver/state.py": _GLUE,
    "engine/backend.py": "the local engine as a backend: tests/e2e/test_engine*.py",
    "engine/items.py": "item shapes the tools declare: engine/test_executor.py and engine/test_mcp.py",
    "engine/mcp_types.py": "types the MCP modules share: engine/test_mcp.py",
    "engine/plan.py": "what the loop needs of a request, a dataclass: engine/test_loop.py and test_web_search.py",
    "engine/response.py": "the starting response object: engine/test_emitter.py",
    "engine/turn.py": "what the engine reads of a turn: tests/e2e/test_engine.py",
    "http/authorized.py": _HANDLER + "tests/e2e/test_authorization.py",
    "http/feedback.py": _HANDLER + "tests/e2e/test_feedback.py",
    "http/drain.py": "SIGTERM's drain over a running aiohttp server and its signals: tests/e2e/test_drain.py",
    "http/metrics.py": _HANDLER + "tests/e2e/test_metrics.py",
    "http/openai_conversations.py": _HANDLER + "tests/e2e/test_openai_conversations.py",
    "http/query.py": _HANDLER + "tests/e2e/test_query.py, test_streaming_query.py, test_interrupt.py",
    "http/quotas.py": _HANDLER + "tests/e2e/test_quota_api.py",
    "http/responses.py": _HANDLER + "tests/e2e/test_endpoints.py, test_streaming.py",
    "http/services.py": _GLUE,
    "http/shields.py": _HANDLER + "tests/e2e/test_shields.py",
    "http/sse.py": "the SSE sink of the runner over aiohttp: tests/e2e/test_streaming.py, test_client_left.py",
    "http/tools.py": _HANDLER + "tests/e2e/test_tool_catalog.py",
    "identity/__init__.py": "`Identity` and the `Authenticator` protocol: every identity/ test uses them",
    "legacy/response.py": "legacy/test_stream.py",
    "observability/observers.py": "built from the configuration: observability/test_access_log_e2e.py, "
                                  "test_tracing_e2e.py",
    "observability/requests.py": "observability/test_access_log.py and test_tracing.py",
    "observability/turns.py": "observability/test_metrics.py (left there while issue 40's Turn split changes them; "
                              "then test_turns.py)",
    "quota/admission.py": "quota/test_batches.py",
    "quota/limited.py": "what both strategies share: quota/test_service.py",
    "quota/off.py": "quota/test_service.py",
    "quota/postgres_holds.py": "quota/test_service.py and test_holds.py on PostgreSQL",
    "quota/sqlite_ledger.py": "quota/test_service.py on SQLite",
    "quota/store.py": "the quotas' SQL: quota/test_service.py, test_holds.py, test_batches.py on both engines",
    "schema/api.py": _WIRE + "tests/e2e/test_endpoints.py and test_openapi.py",
    "schema/api_response.py": "the response object's model in /openapi.json: tests/e2e/test_openapi.py checks "
                              "answers against it",
    "schema/compaction_api.py": _WIRE + "compaction/test_window.py",
    "schema/conversations.py": _WIRE + "tests/e2e/test_conversations.py",
    "schema/json_types.py": "type names only (an alias, TypedDicts), no runtime behaviour: mypy (test_typecheck.py) checks their uses",
    "schema/quota_api.py": _WIRE + "tests/e2e/test_quota_api.py",
    "schema/responses_tools.py": _WIRE + "schema/test_responses_request.py",
    "schema/responses_types.py": _WIRE + "schema/test_responses_request.py",
    "sdk/drive.py": "the SDK's I/O over the openai clients: sdk/test_agent.py and the other sdk/ files",
    "sdk/errors.py": "exception classes: sdk/test_state.py",
    "storage/open.py": "the storage factory: every storage/ test opens its database with it",
    "turns/blocked.py": "a blocked turn's answer: tests/e2e/test_shields.py (the verdict: turns/test_shields.py)",
    "turns/forward.py": "the forward backend: tests/e2e/test_endpoints.py and the e2e suite",
    "turns/local.py": "the local-engine backend: tests/e2e/test_engine*.py",
    "turns/service.py": _GLUE,
}


def unit_file(module: Path) -> Path:
    """Where the unit tests of a module under gateway/ go."""
    rel = module.relative_to(GATEWAY)
    name = rel.parent.name if rel.name == "__init__.py" else rel.stem
    return TESTS / rel.parent / f"test_{name}.py"


def only_reexports(module: Path) -> bool:
    """A docstring, imports and `__all__`: nothing of its own to test."""
    for node in ast.parse(module.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue
        return False
    return True


def modules() -> list[Path]:
    return sorted(GATEWAY.rglob("*.py"))


def unit_test_files() -> list[Path]:
    return sorted(path for path in TESTS.rglob("test_*.py")
                  if path.relative_to(TESTS).parts[0] not in NOT_UNIT)


def module_of(test_file: Path) -> Path | None:
    """The module a unit test file is named for, if it exists."""
    rel = test_file.relative_to(TESTS)
    name = rel.stem.removeprefix("test_")
    for candidate in (GATEWAY / rel.parent / f"{name}.py", GATEWAY / rel.parent / "__init__.py"):
        if candidate.exists() and unit_file(candidate) == test_file:
            return candidate
    return None


def test_every_unit_test_file_is_named_for_its_module():
    stray = [str(path.relative_to(TESTS)) for path in unit_test_files()
             if module_of(path) is None and str(path.relative_to(TESTS)) not in CROSS_MODULE]
    assert stray == [], (
        "these test files name no module of gateway/: rename each to tests/<pkg>/test_<module>.py "
        "of the module it tests, move behaviour tests to tests/e2e/, or add it to CROSS_MODULE "
        f"with its reason: {stray}")


def test_every_module_has_its_unit_file_or_a_reason():
    missing = [str(module.relative_to(GATEWAY)) for module in modules()
               if not unit_file(module).exists() and not only_reexports(module)
               and str(module.relative_to(GATEWAY)) not in WITHOUT_UNIT_FILE]
    assert missing == [], (
        "these modules have no unit file: add tests/<pkg>/test_<module>.py, or add the module "
        f"to WITHOUT_UNIT_FILE with its reason: {missing}")


def test_the_lists_hold_no_stale_entry():
    cross = [name for name in CROSS_MODULE
             if not (TESTS / name).exists() or module_of(TESTS / name) is not None]
    without = [name for name in WITHOUT_UNIT_FILE
               if not (GATEWAY / name).exists() or unit_file(GATEWAY / name).exists()]
    assert cross == [], f"CROSS_MODULE entries that are gone or now named for a module: {cross}"
    assert without == [], f"WITHOUT_UNIT_FILE entries that are gone or now have a unit file: {without}"
    assert all(reason.strip() for reason in [*CROSS_MODULE.values(), *WITHOUT_UNIT_FILE.values()])


def test_the_mapping_itself():
    # The rule the other tests apply, on files that exist today.
    assert unit_file(GATEWAY / "http" / "header_limits.py") == TESTS / "http" / "test_header_limits.py"
    assert unit_file(GATEWAY / "redaction.py") == TESTS / "test_redaction.py"
    assert unit_file(GATEWAY / "config" / "__init__.py") == TESTS / "config" / "test_config.py"
    assert module_of(TESTS / "config" / "test_config.py") == GATEWAY / "config" / "__init__.py"
    assert module_of(TESTS / "test_layout.py") is None
    assert only_reexports(GATEWAY / "streaming" / "__init__.py")
    assert not only_reexports(GATEWAY / "redaction.py")
