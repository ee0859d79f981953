"""Responses input/output items: how they are stored, and how they become chat messages.

Llama Stack stores a turn's input in three slightly different shapes (see the
fixtures `responses-list.json`, `responses-input-items*.json`), reproduced here:

* a plain turn: a string input becomes a message with `input_text` parts and a
  `msg_<uuid4>` id;
* a turn with `previous_response_id`: the string input stays a string, id null;
* a turn with `conversation`: `input_text` parts, id null (the conversation copy of the
  same message gets a `msg_<48 hex>` id).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from .store import new_item_id
from .tools import file_search_tool_content

PLAIN, PREVIOUS, CONVERSATION = "plain", "previous", "conversation"


def _parts(text: str) -> list[dict[str, str]]:
    return [{"text": text, "type": "input_text"}]


def message_item(content: Any, role: str = "user", item_id: str | None = None,
                 status: str | None = None) -> dict[str, Any]:
    return {"content": content, "role": role, "type": "message", "id": item_id,
            "status": status}


def normalize_item(item: dict[str, Any]) -> dict[str, Any]:
    """Key order and defaults of Llama Stack's item models."""
    kind = item.get("type", "message")
    if kind == "message":
        return message_item(item.get("content"), item.get("role", "user"), item.get("id"),
                            item.get("status"))
    if kind == "function_call_output":
        return {"call_id": item.get("call_id"), "output": item.get("output"),
                "type": kind, "id": item.get("id"), "status": item.get("status")}
    if kind == "mcp_approval_response":
        return {"approval_request_id": item.get("approval_request_id"),
                "approve": item.get("approve"), "type": kind, "id": item.get("id"),
                "reason": item.get("reason")}
    return dict(item)


def turn_input_items(raw_input: str | list[Any], mode: str) -> list[dict[str, Any]]:
    """This turn's input as stored with the response (see the module docstring)."""
    if isinstance(raw_input, str):
        if mode == PLAIN:
            return [message_item(_parts(raw_input), item_id="msg_" + str(uuid.uuid4()))]
        if mode == PREVIOUS:
            return [message_item(raw_input)]
        return [message_item(_parts(raw_input))]
    return [normalize_item(item) for item in raw_input]


def conversation_copies(items: list[dict[str, Any]], keep_strings: bool = False) -> list[dict[str, Any]]:
    """Input items as appended to a conversation: every message gets a msg_<48 hex> id.
    `keep_strings`: a message's string content stays a string, as Llama Stack 0.7.3
    keeps an input item's (only a string `input` becomes `input_text` parts there)."""
    out = []
    for item in items:
        item = dict(item)
        if item.get("type") == "message":
            if isinstance(item.get("content"), str) and not keep_strings:
                item["content"] = _parts(item["content"])
            if not item.get("id"):
                item["id"] = new_item_id()
        elif not item.get("id"):
            item["id"] = new_item_id("item_")
        out.append(item)
    return out


def conversation_item(item: dict[str, Any]) -> dict[str, Any]:
    """An item added through the Conversations API (content kept as given)."""
    norm = normalize_item(item)
    if not norm.get("id"):
        norm["id"] = new_item_id() if norm.get("type") == "message" else new_item_id("item_")
    return norm


def _chat_content(content: Any, role: str) -> Any:
    if isinstance(content, list):
        texts = [p.get("text", "") for p in content if isinstance(p, dict)]
        if role == "assistant":
            return "".join(texts)
        return [{"type": "text", "text": t} for t in texts]
    return content if content is not None else ""


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def to_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items -> Chat Completions messages, the way Llama Stack replays history."""
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            if role == "developer":
                role = "system"
            messages.append({"role": role, "content": _chat_content(item.get("content"), role)})
        elif kind == "function_call":
            messages.append(_tool_call(item.get("call_id") or "", item.get("name") or "",
                                       item.get("arguments") or ""))
        elif kind == "function_call_output":
            output = item.get("output")
            if not isinstance(output, (str, list)):
                output = json.dumps(output)
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": output})
        elif kind == "mcp_call":
            call_id = item.get("id") or ""
            messages.append(_tool_call(call_id, item.get("name") or "",
                                       item.get("arguments") or ""))
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": [{"type": "text", "text": item.get("output")
                                          or item.get("error") or ""}]})
        elif kind == "file_search_call" and item.get("results") is not None:
            call_id = item.get("id") or ""
            queries = item.get("queries") or [""]
            messages.append(_tool_call(call_id, "file_search",
                                       json.dumps({"query": queries[0]})))
            messages.append({"role": "tool", "tool_call_id": call_id,
                             "content": file_search_tool_content(item["results"])})
        # mcp_list_tools, approval requests/responses, reasoning: not sent to the model
    return messages
