"""A response's MCP servers, listed before its first round (the loop's prelude).

Each `mcp` tool of the request is listed once per response: an `mcp_list_tools` item
already in the conversation for the same `server_label` is reused (no listing, no
events), otherwise one item is streamed (`response.mcp_list_tools.in_progress`, then
`completed`, or `failed` with the item's `error`: the model simply has none of that
server's tools). Servers are listed concurrently. Each listed tool is offered to the
model as a function; a name another tool of the request already has becomes
`<server_label>__<name>`, and the call is mapped back to the server's own name.
`allowed_tools` (a list of names, or `{"tool_names": [...]}`) filters the listing.

Approvals: a call of a tool that `require_approval` covers (`always`; `{always,
never}`: named in `always`, or in neither, as Llama Stack decides) is shown as an
`mcp_approval_request` item and not run; the response ends after that round. The
next request answers it with an `mcp_approval_response` input item (after
`previous_response_id` or in the same `conversation`): approved, the call runs
first thing in that response (an `mcp_call` item with `approval_request_id`) and the
model gets its result; denied, the model is told the user denied it (so it does not
simply ask again). An unknown approval id, or one already answered, is a 422 before
anything runs.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Iterable, Mapping, Sequence

from gateway.config import ClientToolsConfig, McpServerConfig
from gateway.destinations import DestinationPolicy
from gateway.engine.emitter import Emitter
from gateway.engine.executor import Setup, ToolCall
from gateway.engine.items import CallItem
from gateway.engine.mcp import McpExecutor, error_text, list_tools, model_name
from gateway.engine.mcp_types import MCP_APPROVAL_REQUEST, MCP_CALL, MCP_LIST_TOOLS, McpFailure, McpLimits, McpServer
from gateway.engine.plan import Plan
from gateway.engine.translate import unsupported
from gateway.schema.errors import ApiError, invalid_attribute
from gateway.schema.ids import new_item_id
from gateway.streaming.enrich import scrub_tool_echo
from gateway.streaming.events import Event


def mcp_limits(config: ClientToolsConfig) -> McpLimits:
    """`client_tools.max_mcp_*`: what a client's own server may send."""
    return McpLimits(config.max_mcp_message_bytes, config.max_mcp_tools, config.max_mcp_tool_schema_bytes)


def allowed_names(allowed: Any) -> frozenset[str] | None:
    """`allowed_tools` as a set of names (None: every tool)."""
    if isinstance(allowed, dict):
        allowed = allowed.get("tool_names")
    if isinstance(allowed, list):
        return frozenset(str(name) for name in allowed)
    return None


def needs_approval(tool: Mapping[str, Any], name: str) -> bool:
    approval = tool.get("require_approval", "never")
    if approval == "never" or approval is None:
        return False
    if isinstance(approval, dict):
        if name in (approval.get("always") or ()):
            return True
        if name in (approval.get("never") or ()):
            return False
    return True


def echoed(tool: dict[str, Any]) -> dict[str, Any]:
    """An MCP tool as the response echoes it: `require_approval`'s filter in the
    `openai` form (`{"always": {"tool_names": [...]}}`; requests give Llama Stack's lists)."""
    approval = tool.get("require_approval")
    if not isinstance(approval, dict):
        return dict(tool)  # a copy: the echo is scrubbed of what the gateway attached
    return {**tool, "require_approval": {key: {"tool_names": list(names)} for key, names in approval.items()
                                         if isinstance(names, list) and names}}


Approval = tuple[dict[str, Any], bool]  # the mcp_approval_request item, approved


def approvals_of(inputs: list[dict[str, Any]], history: list[dict[str, Any]],
                 tools: list[dict[str, Any]]) -> list[Approval]:
    """The request's answers to earlier approval requests; 422 for an id that names no
    pending request of this conversation, or a server this request lacks."""
    requests = {item.get("id"): item for item in history if item.get("type") == "mcp_approval_request"}
    answered = {item.get("approval_request_id") for item in history
                if item.get("type") in ("mcp_approval_response", "mcp_call")}
    labels = {tool.get("server_label") for tool in tools if tool.get("type") == "mcp"}
    approvals = []
    for item in inputs:
        if item.get("type") != "mcp_approval_response":
            continue
        request_id = item.get("approval_request_id")
        request = requests.get(request_id)
        if request is None or request_id in answered:
            raise _bad_approval(f"mcp_approval_response names {request_id!r}, which is no pending approval "
                                "request of this conversation (unknown, or already answered)")
        if request.get("server_label") not in labels:
            raise _bad_approval(f"The approval request {request_id!r} is for MCP server "
                                f"{request.get('server_label')!r}, which this request's tools do not include")
        answered.add(request_id)
        approvals.append((request, bool(item.get("approve"))))
    return approvals


def _bad_approval(cause: str) -> ApiError:
    return invalid_attribute(cause, param="input", code="invalid_approval_response")


def mcp_prelude(tools: list[dict[str, Any]], earlier: Iterable[dict[str, Any]], plan: Plan, emitter: Emitter,
                timeouts: Mapping[str, float | None], approvals: Sequence[Approval] = (),
                client_policy: DestinationPolicy | None = None, limits: McpLimits | None = None,
                choice: Any = None) -> Callable[[], AsyncIterator[list[Event]]]:
    """The prelude for `plan`: runs the approved calls, lists the servers, then adds
    their tools to the plan. `timeouts` names the configured servers; the others are
    clients' own, reached under `client_policy` and read within `limits`. `choice`: the
    request's `tool_choice`; an `mcp` one forces its tool in the first round."""
    listed = {item.get("server_label"): item for item in earlier
              if item.get("type") == "mcp_list_tools" and not item.get("error")}
    output_schemas: dict[str, dict[str, Any]] = {}  # by server label: what this response listed

    async def prelude() -> AsyncIterator[list[Event]]:
        servers = [(tool, McpServer.of(tool, timeouts, client_policy, limits)) for tool in tools]
        if approvals:
            async for events in _approved(approvals, servers, plan, emitter):
                yield events
        pending = []
        for tool, server in servers:
            if server.label not in listed:
                opened = emitter.list_started({"id": new_item_id(MCP_LIST_TOOLS.id_prefix), "type": MCP_LIST_TOOLS.type,
                                               "server_label": server.label, "tools": [], "error": None})
                pending.append((tool, server, opened))
        if pending:
            yield emitter.take()
            results = await asyncio.gather(*(list_tools(server) for _, server, _ in pending), return_exceptions=True)
            for (tool, server, opened), result in zip(pending, results):
                if isinstance(result, McpFailure):
                    emitter.list_done(opened, {"error": error_text(result.error)}, failed=True)
                elif isinstance(result, BaseException):
                    raise result
                else:
                    allowed = allowed_names(tool.get("allowed_tools"))
                    shown = [entry for entry in result.tools if allowed is None or entry["name"] in allowed]
                    emitter.list_done(opened, {"tools": shown}, failed=False)
                    listed[server.label] = opened.item
                    output_schemas[server.label] = result.output_schemas
        _offer(servers, listed, plan, emitter, output_schemas)
        _force(choice, servers, plan)
        events = emitter.take()
        if events:
            yield events

    return prelude


async def _approved(approvals: Sequence[Approval], servers: list[tuple[dict[str, Any], McpServer]], plan: Plan,
                    emitter: Emitter) -> AsyncIterator[list[Event]]:
    """Run the approved calls (concurrently); tell the model about each answer."""
    by_label = {server.label: server for _, server in servers}
    jobs = []
    for request, approve in approvals:
        if approve:
            emitter.call_running({"id": new_item_id(MCP_CALL.id_prefix), "type": MCP_CALL.type,
                                  "server_label": request["server_label"],
                                  "name": request["name"], "arguments": request.get("arguments") or "{}",
                                  "approval_request_id": request["id"], "output": None, "error": None,
                                  "status": "in_progress"}, request["id"])
            tool = {"type": "mcp_tool", "server": by_label[request["server_label"]], "mcp_name": request["name"]}
            jobs.append(McpExecutor().execute(ToolCall(request["id"], request["name"],
                                                       request.get("arguments") or "{}", tool)))
    yield emitter.take()
    results = iter(await asyncio.gather(*jobs))
    plan.messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": request["id"], "type": "function", "function": {"name": request["name"],
                                                               "arguments": request.get("arguments") or "{}"}}
        for request, _ in approvals]})
    for request, approve in approvals:
        if approve:
            result = next(results)
            emitter.call_done(request["id"], result.fields, result.is_error)
            content = f"Error: {result.output}" if result.is_error else result.output
        else:
            content = "The user denied this call of the tool."
        plan.messages.append({"role": "tool", "tool_call_id": request["id"], "content": content})


def _force(choice: Any, servers: list[tuple[dict[str, Any], McpServer]], plan: Plan) -> None:
    """`tool_choice: {"type": "mcp", "server_label", "name"}`: the first round must call
    that tool, as a forced function (its name as the model sees it); without `name`, it
    must call a tool (`required`). A name the server did not list (or a listing that
    failed) forces nothing: the round runs with `auto`."""
    if not isinstance(choice, dict) or choice.get("type") != "mcp" or "tools" not in plan.chat:
        return
    name = choice.get("name")
    if name is None:
        plan.tool_choice = "required"
        return
    plan.tool_choice = None
    for offered, tool in plan.tools.items():
        server: Any = tool.get("server")   # an mcp_tool's McpServer
        if tool.get("type") == "mcp_tool" and tool.get("mcp_name") == name and server.label == choice["server_label"]:
            plan.tool_choice = {"type": "function", "function": {"name": offered}}
            return


def _offer(servers: list[tuple[dict[str, Any], McpServer]], listed: Mapping[Any, dict[str, Any]], plan: Plan,
           emitter: Emitter, output_schemas: Mapping[str, Mapping[str, Any]]) -> None:
    """Each listed tool as a function the model may call; its definition keeps the
    tool as listed (`listed`), so that its calls need no listing of their own."""
    taken = set(plan.tools)
    chat_tools = plan.chat.setdefault("tools", [])
    for tool, server in servers:
        item = listed.get(server.label)
        if item is None:
            continue
        allowed = allowed_names(tool.get("allowed_tools"))
        for entry in item.get("tools") or ():
            if allowed is not None and entry.get("name") not in allowed:
                continue
            name = model_name(server.label, entry["name"], taken)
            taken.add(name)
            schemas = {"input_schema": entry.get("input_schema"),
                       "output_schema": (output_schemas.get(server.label) or {}).get(entry["name"])}
            plan.tools[name] = {"type": "mcp_tool", "name": name, "server": server, "mcp_name": entry["name"],
                                "listed": schemas}
            function: dict[str, Any] = {"name": name, "parameters": entry.get("input_schema")
                                        or {"type": "object", "properties": {}}}
            if entry.get("description"):
                function["description"] = entry["description"]
            chat_tools.append({"type": "function", "function": function})
            emitter.call_items[name] = (
                CallItem(MCP_APPROVAL_REQUEST, {"server_label": server.label, "name": entry["name"]})
                if needs_approval(tool, entry["name"]) else
                CallItem(MCP_CALL, {"server_label": server.label, "name": entry["name"], "output": None,
                                    "error": None}))
    if not chat_tools:  # no server answered and no function tools: a plain chat request
        del plan.chat["tools"]
        plan.chat.pop("parallel_tool_calls", None)
        plan.tool_choice = None


class McpTools(McpExecutor):
    """A request's `mcp` tools in the engine: checked, echoed without what the gateway
    attached, listed before the first round (`mcp_prelude`), their calls run by
    `McpExecutor`. `servers` are the operator's (their labels and timeouts); any other
    server is a client's (`turns/tools.py` let it through the config's rules), and its
    connections go only where `client_policy` allows (`mcp_connect.py`)."""

    item_kinds = (MCP_CALL, MCP_APPROVAL_REQUEST, MCP_LIST_TOOLS)

    def __init__(self, servers: Sequence[McpServerConfig] = (), client_policy: DestinationPolicy | None = None,
                 limits: McpLimits | None = None):
        self._timeouts = {server.name: server.timeout for server in servers}
        self._labels = frozenset(self._timeouts)
        self._client_policy = client_policy
        self._limits = limits

    def check(self, body: dict[str, Any]) -> None:
        for tool in body.get("tools") or ():
            label = tool.get("server_label")
            if tool.get("type") == "mcp" and label not in self._labels and not tool.get("server_url"):
                raise unsupported(f"MCP server {label!r}: the local engine reaches MCP servers by URL, "
                                  "not by connector_id", param="tools")
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") == "mcp" and not any(
                tool.get("type") == "mcp" and tool.get("server_label") == choice.get("server_label")
                for tool in body.get("tools") or ()):
            raise invalid_attribute(f"tool_choice names MCP server {choice.get('server_label')!r}, which is not "
                                    "among the request's tools", param="tool_choice")

    def echo(self, tool: dict[str, Any]) -> dict[str, Any] | None:
        if tool.get("type") != "mcp":
            return None
        shown = {"tools": [echoed(tool)]}
        scrub_tool_echo(shown, self._labels)  # never the credentials the gateway attached
        return shown["tools"][0]

    def offer(self, setup: Setup) -> None:
        # Answers to earlier approval requests: a 422 before anything runs, MCP tools or not.
        approvals = approvals_of(setup.inputs, setup.history, setup.tools)
        servers = [tool for tool in setup.tools if tool.get("type") == "mcp"]
        if servers:
            setup.plan.prelude = mcp_prelude(servers, setup.history + setup.inputs, setup.plan, setup.emitter,
                                             self._timeouts, approvals, self._client_policy, self._limits,
                                             setup.body.get("tool_choice"))
