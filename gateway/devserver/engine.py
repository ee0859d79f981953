"""The server-side tool loop of the Llama Stack stand-in (sans I/O).

Like Llama Stack's `inline::builtin` responses provider: call the model; a function
tool call ends the turn (the client runs it); file_search and MCP calls are run here
and the model is called again; an MCP tool that needs approval ends the turn with an
`mcp_approval_request`. Usage is summed over every model call, as Llama Stack does.

The result is a list of Steps (output items plus what the stream needs to replay
them), so one computation serves both the JSON answer and the SSE stream.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from .model import decide, last_user_text, make_arguments, new_call_id
from .tools import (Toolset, file_search_query, file_search_results,
                    file_search_tool_content, run_mcp_tool)

MAX_MODEL_CALLS = 10


@dataclass(slots=True)
class Step:
    kind: str  # message | function_call | file_search | mcp_list | mcp_call | approval
    item: dict[str, Any]
    pieces: list[str] | None = None  # text deltas of a message (None: one per word)
    arguments: str | None = None  # raw tool-call arguments (streamed as deltas)
    args_item_id: str | None = None  # the fc_ id the argument deltas of an approval carry
    hangs: bool = False  # an MCP call whose server vanished: nothing follows its in_progress


@dataclass(slots=True)
class Turn:
    steps: list[Step]
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def output(self) -> list[dict[str, Any]]:
        return [step.item for step in self.steps]

    @property
    def hangs(self) -> bool:
        """Llama Stack never finishes the turn (an MCP server gone mid-call)."""
        return bool(self.steps) and self.steps[-1].hangs


def _item_id(prefix: str) -> str:
    return prefix + str(uuid.uuid4())


def text_message(text: str) -> dict[str, Any]:
    return {"content": [{"text": text, "type": "output_text", "annotations": [],
                         "logprobs": []}],
            "role": "assistant", "type": "message", "id": _item_id("msg_"),
            "status": "completed"}


def approvals_from(history: list[dict[str, Any]],
                   turn_input: list[dict[str, Any]]) -> dict[tuple[str, str], bool]:
    """(tool name, arguments) -> approve, from approval responses to earlier requests."""
    requests = {item.get("id"): item for item in history
                if item.get("type") == "mcp_approval_request"}
    verdicts: dict[tuple[str, str], bool] = {}
    for item in turn_input:
        if item.get("type") != "mcp_approval_response":
            continue
        request = requests.get(item.get("approval_request_id"))
        if request is not None:
            key = (request.get("name") or "", request.get("arguments") or "")
            verdicts[key] = bool(item.get("approve"))
    return verdicts


def _tool_messages(call_id: str, name: str, arguments: str, content: Any) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"index": 0, "id": call_id, "type": "function",
                 "function": {"name": name, "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": call_id, "content": content}]


def run_turn(messages: list[dict[str, Any]], toolset: Toolset, *,
             approvals: dict[tuple[str, str], bool] | None = None,
             tool_choice: Any = None, deltas: int | None = None,
             parallel: bool = False) -> Turn:
    """parallel (the `parallel-calls` trigger): a function call comes with a call of
    every other function tool in the same turn, as chat completions' does."""
    turn = Turn(steps=[])
    steps = turn.steps
    # Llama Stack lists every MCP server's tools before the first model call.
    for server in toolset.mcp_servers:
        steps.append(Step("mcp_list", {"id": _item_id("mcp_list_"), "type": "mcp_list_tools",
                                       "server_label": server.server_label,
                                       "tools": server.tools}))
    specs = toolset.specs or None
    for _ in range(MAX_MODEL_CALLS):
        reply = decide(messages, specs, tool_choice=tool_choice, deltas=deltas)
        turn.input_tokens += reply.prompt_tokens
        turn.output_tokens += reply.completion_tokens
        if reply.text is not None:
            steps.append(Step("message", text_message(reply.text), pieces=reply.pieces))
            break
        name, args = reply.tool_name or "", reply.arguments or ""
        kind, meta = toolset.kinds[name]
        call_id = new_call_id()
        fc_id = _item_id("fc_")
        if kind == "function":
            calls = [(name, args)]
            if parallel:
                text = last_user_text(messages)
                calls += [(spec.name, json.dumps(make_arguments(spec.parameters, text)))
                          for spec in toolset.specs
                          if spec.name != name and toolset.kinds[spec.name][0] == "function"]
            for call_name, call_args in calls:
                steps.append(Step("function_call", {"call_id": call_id, "name": call_name,
                                                    "arguments": call_args,
                                                    "type": "function_call",
                                                    "id": fc_id, "status": "completed"},
                                  arguments=call_args))
                call_id, fc_id = new_call_id(), _item_id("fc_")
            break
        if kind == "file_search":
            query = file_search_query(args, last_user_text(messages))
            results = file_search_results(query, list(meta.get("vector_store_ids") or []))
            steps.append(Step("file_search", {"id": fc_id, "queries": [query],
                                              "status": "completed", "type": "file_search_call",
                                              "results": results}, arguments=args))
            messages = messages + _tool_messages(call_id, name, args,
                                                 file_search_tool_content(results))
            continue
        server = meta
        if server.needs_approval(name):
            verdict = (approvals or {}).get((name, args))
            if verdict is None:
                steps.append(Step("approval", {"arguments": args, "id": _item_id("approval_"),
                                               "name": name,
                                               "server_label": server.server_label,
                                               "type": "mcp_approval_request"},
                                  arguments=args, args_item_id=fc_id))
                break
            if not verdict:
                break  # Llama Stack drops a denied call and ends the turn without a message
        result = run_mcp_tool(name, args)
        steps.append(Step("mcp_call", {"id": fc_id, "type": "mcp_call", "arguments": args,
                                       "name": name, "server_label": server.server_label,
                                       "error": result.error, "output": result.output},
                          arguments=args, hangs=result.hangs))
        if result.hangs:
            break
        messages = messages + _tool_messages(call_id, name, args,
                                             [{"type": "text", "text": result.model_text}])
    return turn
