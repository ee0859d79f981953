"""The Responses tools of the Llama Stack stand-in: echo shapes and simulated execution.

Function tools are executed by the client. file_search and MCP tools are "executed"
here without any I/O: file_search returns made-up deterministic chunks and every MCP
server offers the two tools of the recorded FastMCP server (`add`, `echo`). A server
whose `server_url` contains `faulty` also offers the failing tools of the test MCP
server's `--faulty` mode (tests/support/mcp_server.py), and their calls fail the way
Llama Stack 0.7.3 was recorded reporting them (fixtures `responses-mcp-call-error*`,
`responses-mcp-protocol-error*`, `err-mcp-call-unreachable-stream.sse`).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from .model import ToolSpec

TOOL_TYPES = ("web_search", "web_search_preview", "web_search_preview_2025_03_11",
              "web_search_2025_08_26", "file_search", "function", "mcp")

# input_schema as FastMCP 1.x generated them for the recorded server.
MCP_TOOLS: tuple[dict[str, Any], ...] = (
    {"input_schema": {"properties": {"a": {"title": "A", "type": "integer"},
                                     "b": {"title": "B", "type": "integer"}},
                      "required": ["a", "b"], "title": "addArguments", "type": "object"},
     "name": "add", "description": "Add two integers."},
    {"input_schema": {"properties": {"text": {"title": "Text", "type": "string"}},
                      "required": ["text"], "title": "echoArguments", "type": "object"},
     "name": "echo", "description": "Echo text back."},
)

FAULTY_MARKER = "faulty"


def _text_tool(name: str, description: str) -> dict[str, Any]:
    return {"input_schema": {"properties": {"text": {"title": "Text", "type": "string"}},
                             "required": ["text"], "title": f"{name}Arguments", "type": "object"},
            "name": name, "description": description}


FAULTY_MCP_TOOLS: tuple[dict[str, Any], ...] = (
    _text_tool("explode", "Always fails: the tool raises an error."),
    _text_tool("reject", "Always fails: the server answers a JSON-RPC error."),
    _text_tool("vanish", "The server exits while answering."),
)

FILE_SEARCH_SCHEMA = {"type": "object", "properties": {"query": {"type": "string"}},
                      "required": ["query"]}


@dataclass(slots=True)
class McpServer:
    server_label: str
    server_url: str | None
    tools: list[dict[str, Any]]
    approval: Any  # "always" | "never" | {"always": [...], "never": [...]} | None

    def needs_approval(self, name: str) -> bool:
        """Llama Stack's rule: a filter's `always` names win, then its `never` names;
        a tool named in neither needs approval. Its filter takes lists of names;
        OpenAI's `{"tool_names": [...]}` form is read alike."""
        rule = self.approval
        if rule == "always":
            return True
        if isinstance(rule, dict):
            for key, verdict in (("always", True), ("never", False)):
                names = rule.get(key) or []
                if isinstance(names, dict):
                    names = names.get("tool_names") or []
                if name in names:
                    return verdict
            return True
        return False


@dataclass(slots=True)
class Toolset:
    """What one request's tools mean to the scripted loop."""

    echo: list[dict[str, Any]] = field(default_factory=list)
    specs: list[ToolSpec] = field(default_factory=list)
    # tool name -> ("function", None) | ("file_search", tool) | ("mcp", McpServer)
    kinds: dict[str, tuple[str, Any]] = field(default_factory=dict)
    mcp_servers: list[McpServer] = field(default_factory=list)
    mcp_definitions: list[dict[str, Any]] = field(default_factory=list)


def _allowed(tool: dict[str, Any]) -> set[str] | None:
    allowed = tool.get("allowed_tools")
    if isinstance(allowed, list):
        return set(allowed)
    if isinstance(allowed, dict) and isinstance(allowed.get("tool_names"), list):
        return set(allowed["tool_names"])
    return None


def build_toolset(tools: list[dict[str, Any]] | None) -> Toolset:
    """Echo shapes (Llama Stack's normalisation) and the model-facing tool list."""
    ts = Toolset()
    for tool in tools or ():
        kind = tool.get("type")
        if kind == "function":
            ts.echo.append({"type": "function", "name": tool.get("name"),
                            "description": tool.get("description"),
                            "parameters": tool.get("parameters"),
                            "strict": tool.get("strict")})
            _add_spec(ts, ToolSpec(tool["name"], tool.get("parameters")), ("function", None))
        elif kind == "file_search":
            ts.echo.append({"type": "file_search",
                            "vector_store_ids": tool.get("vector_store_ids") or [],
                            "filters": tool.get("filters"),
                            "max_num_results": tool.get("max_num_results", 10),
                            "ranking_options": tool.get("ranking_options")})
            _add_spec(ts, ToolSpec("file_search", FILE_SEARCH_SCHEMA), ("file_search", tool))
        elif kind == "mcp":
            # Llama Stack drops the URL, headers and approval policy from the echo.
            ts.echo.append({"type": "mcp", "server_label": tool.get("server_label"),
                            "allowed_tools": tool.get("allowed_tools")})
            ts.mcp_definitions.append(tool)
            allowed = _allowed(tool)
            offered = MCP_TOOLS + FAULTY_MCP_TOOLS if _is_faulty(tool.get("server_url")) else MCP_TOOLS
            listed = [dict(t) for t in offered if allowed is None or t["name"] in allowed]
            server = McpServer(tool.get("server_label") or "", tool.get("server_url"), listed,
                               tool.get("require_approval"))
            ts.mcp_servers.append(server)
            for t in listed:
                _add_spec(ts, ToolSpec(t["name"], t["input_schema"]), ("mcp", server))
        else:  # web_search variants: echoed, never called by the scripted model
            ts.echo.append({"type": kind, "search_context_size":
                            tool.get("search_context_size", "medium")})
    return ts


def _is_faulty(server_url: Any) -> bool:
    return isinstance(server_url, str) and FAULTY_MARKER in server_url


def _add_spec(ts: Toolset, spec: ToolSpec, kind: tuple[str, Any]) -> None:
    if spec.name not in ts.kinds:  # first definition of a name wins
        ts.kinds[spec.name] = kind
        ts.specs.append(spec)


@dataclass(slots=True)
class McpResult:
    """A simulated MCP call: the item's `output`/`error` as Llama Stack reports them, the
    text the model is shown, and whether the call never returns (the server vanished)."""

    output: str | None = None
    error: str | None = None
    model_text: str = ""
    hangs: bool = False


def run_mcp_tool(name: str, arguments: str) -> McpResult:
    try:
        args = json.loads(arguments) if arguments else {}
    except ValueError:
        return _failed(f"invalid arguments: {arguments}")
    if name == "add":
        try:
            total = args.get("a", 0) + args.get("b", 0)
        except TypeError:
            return _failed("add needs two numbers")
        return McpResult(output=str(total), model_text=str(total))
    if name == "echo":
        text = str(args.get("text", ""))
        return McpResult(output=text, model_text=text)
    if name == "explode":
        # An MCP result with isError: Llama Stack renders it from error_code/error_message
        # (1 and None for MCP), so the tool's text reaches only the model.
        return McpResult(error="Error (code 1): None",
                         model_text=f"Error executing tool explode: explode refused: {args.get('text', '')}")
    if name == "reject":
        # A JSON-RPC error answer: Llama Stack keeps str(McpError), the message alone.
        return _failed(f"reject refused: {args.get('text', '')}")
    if name == "vanish":
        return McpResult(hangs=True)  # Llama Stack waits for the answer forever
    return _failed(f"unknown tool {name}")


def _failed(error: str) -> McpResult:
    return McpResult(error=error, model_text=error)


def file_search_results(query: str, vector_store_ids: list[str]) -> list[dict[str, Any]]:
    """One made-up chunk per search, derived from the query so it is deterministic."""
    digest = hashlib.sha1((query + "|" + ",".join(vector_store_ids)).encode()).hexdigest()
    file_id = "file-scripted" + digest[:19]
    chunk_id = str(uuid.UUID(digest[:32]))
    text = f"Scripted handbook chunk about: {query}"
    return [{"attributes": {"filename": "scripted-handbook.txt", "file_id": file_id,
                            "chunk_id": chunk_id, "document_id": file_id,
                            "token_count": float(len(text.split()))},
             # Llama Stack puts the file id in `filename` (the real name is in attributes).
             "file_id": file_id, "filename": file_id, "score": 0.875, "text": text}]


def file_search_tool_content(results: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The tool message Llama Stack sends the model after a file search (text parts)."""
    parts = [{"type": "text", "text": f"file_search tool found {len(results)} chunks: "}]
    for i, res in enumerate(results, 1):
        parts.append({"type": "text", "text": f"[{i}] {res['attributes'].get('filename')} "
                                              f"{res['text']} "})
    return parts


def file_search_query(arguments: str, fallback: str) -> str:
    try:
        query = json.loads(arguments).get("query")
    except (ValueError, AttributeError):
        query = None
    return query if isinstance(query, str) else fallback
