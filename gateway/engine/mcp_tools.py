"""A response's MCP servers, listed before its first round (the loop's prelude).

Each `mcp` tool of the request is listed once per response: an `mcp_list_tools` item
already in the conversation for the same `server_label` is reused (no listing, no
events), otherwise one item is streamed (`response.mcp_list_tools.in_progress`, then
`completed`, or `failed` with the item's `error`: the model simply has none of that
server's tools). Servers are listed concurrently. Each listed tool is offered to the
model as a function; a name another tool of the request already has becomes
`<server_label>__<name>`, and the call is mapped back to the server's own name.
`allowed_tools` (a list of names, or `{"tool_names": [...]}`) filters the listing.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Callable, Iterable, Mapping

from gateway.engine.emitter import Emitter
from gateway.engine.loop import Plan
from gateway.engine.mcp import McpFailure, McpServer, error_text, list_tools, model_name
from gateway.schema.ids import new_item_id
from gateway.streaming.events import Event


def allowed_names(allowed: Any) -> frozenset[str] | None:
    """`allowed_tools` as a set of names (None: every tool)."""
    if isinstance(allowed, dict):
        allowed = allowed.get("tool_names")
    if isinstance(allowed, list):
        return frozenset(str(name) for name in allowed)
    return None


def mcp_prelude(tools: list[dict[str, Any]], earlier: Iterable[dict[str, Any]], plan: Plan, emitter: Emitter,
                timeouts: Mapping[str, float | None]) -> Callable[[], AsyncIterator[list[Event]]]:
    """The prelude for `plan`: lists the servers, then adds their tools to the plan."""
    listed = {item.get("server_label"): item for item in earlier
              if item.get("type") == "mcp_list_tools" and not item.get("error")}

    async def prelude() -> AsyncIterator[list[Event]]:
        servers = [(tool, McpServer.of(tool, timeouts)) for tool in tools]
        pending = []
        for tool, server in servers:
            if server.label not in listed:
                opened = emitter.list_started({"id": new_item_id("mcpl"), "type": "mcp_list_tools",
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
                    shown = [entry for entry in result if allowed is None or entry["name"] in allowed]
                    emitter.list_done(opened, {"tools": shown}, failed=False)
                    listed[server.label] = opened.item
        _offer(servers, listed, plan, emitter)
        events = emitter.take()
        if events:
            yield events

    return prelude


def _offer(servers: list[tuple[dict[str, Any], McpServer]], listed: Mapping[Any, dict[str, Any]], plan: Plan,
           emitter: Emitter) -> None:
    """Each listed tool as a function the model may call."""
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
            plan.tools[name] = {"type": "mcp_tool", "name": name, "server": server, "mcp_name": entry["name"]}
            function: dict[str, Any] = {"name": name, "parameters": entry.get("input_schema")
                                        or {"type": "object", "properties": {}}}
            if entry.get("description"):
                function["description"] = entry["description"]
            chat_tools.append({"type": "function", "function": function})
            emitter.call_items[name] = {"type": "mcp_call", "server_label": server.label, "name": entry["name"],
                                        "output": None, "error": None}
    if not chat_tools:  # no server answered and no function tools: a plain chat request
        del plan.chat["tools"]
        plan.chat.pop("parallel_tool_calls", None)
        plan.tool_choice = None
