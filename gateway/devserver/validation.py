"""Request validation of POST /v1/responses, worded like Llama Stack's pydantic errors.

Llama Stack answers 400 `{"error":{"message":"{'errors': [...]}"}}` where the message
is the Python repr of pydantic's error list; :func:`check_create` returns that list
(empty when the body is acceptable).
"""

from __future__ import annotations

from typing import Any

from .tools import TOOL_TYPES

ITEM_TYPES = frozenset({"message", "function_call_output", "mcp_approval_response",
                        "function_call", "mcp_call", "mcp_list_tools", "mcp_approval_request",
                        "file_search_call", "web_search_call", "reasoning"})

_WRONG_INPUT = [
    {"loc": ["body", "input", "str"], "msg": "Input should be a valid string",
     "type": "string_type"},
    {"loc": ["body", "input", "list[union[tagged-union[OpenAIResponseMessage,"
             "OpenAIResponseOutputMessageWebSearchToolCall,"
             "OpenAIResponseOutputMessageFileSearchToolCall,"
             "OpenAIResponseOutputMessageFunctionToolCall,OpenAIResponseOutputMessageMCPCall,"
             "OpenAIResponseOutputMessageMCPListTools,OpenAIResponseMCPApprovalRequest,"
             "OpenAIResponseOutputMessageReasoningItem],OpenAIResponseInputFunctionToolCallOutput,"
             "OpenAIResponseMCPApprovalResponse,OpenAIResponseMessage]]"],
     "msg": "Input should be a valid list", "type": "list_type"},
]
_TAGS = ", ".join(f"'{t}'" for t in TOOL_TYPES)


def missing(*loc: Any) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": "Field required", "type": "missing"}


def json_invalid(pos: int) -> list[dict[str, Any]]:
    return [{"loc": ["body", pos], "msg": "JSON decode error", "type": "json_invalid"}]


def not_an_object() -> list[dict[str, Any]]:
    return [{"loc": ["body"], "msg": "Input should be a valid dictionary or object to extract "
             "fields from", "type": "model_attributes_type"}]


def _string(value: Any, *loc: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return []
    return [{"loc": ["body", *loc], "msg": "Input should be a valid string",
             "type": "string_type"}]


def _check_input(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return []
    if not isinstance(value, list):
        return list(_WRONG_INPUT)
    errors = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            errors.append({"loc": ["body", "input", i], "msg": "Input should be a valid "
                           "dictionary or object to extract fields from",
                           "type": "model_attributes_type"})
            continue
        kind = item.get("type", "message" if "role" in item else None)
        if kind not in ITEM_TYPES:
            errors.append({"loc": ["body", "input", i], "msg": f"Input tag '{kind}' found "
                           "using 'type' does not match any of the expected tags",
                           "type": "union_tag_invalid"})
        elif kind == "message":
            for key in ("role", "content"):
                if key not in item:
                    errors.append(missing("input", i, "message", key))
        elif kind == "function_call_output":
            for key in ("call_id", "output"):
                if key not in item:
                    errors.append(missing("input", i, kind, key))
        elif kind == "mcp_approval_response":
            for key in ("approval_request_id", "approve"):
                if key not in item:
                    errors.append(missing("input", i, kind, key))
    return errors


def _check_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        return [{"loc": ["body", "tools"], "msg": "Input should be a valid list",
                 "type": "list_type"}]
    errors = []
    for i, tool in enumerate(tools):
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind is None:
            errors.append({"loc": ["body", "tools", i], "msg": "Unable to extract tag using "
                           "discriminator 'type'", "type": "union_tag_not_found"})
        elif kind not in TOOL_TYPES:
            errors.append({"loc": ["body", "tools", i], "msg": f"Input tag '{kind}' found using "
                           f"'type' does not match any of the expected tags: {_TAGS}",
                           "type": "union_tag_invalid"})
        elif kind == "function":
            if "name" not in tool:
                errors.append(missing("tools", i, "function", "name"))
            else:
                errors += _string(tool["name"], "tools", i, "function", "name")
        elif kind == "mcp":
            if "server_label" not in tool:
                errors.append(missing("tools", i, "mcp", "server_label"))
        elif kind == "file_search" and "vector_store_ids" not in tool:
            errors.append(missing("tools", i, "file_search", "vector_store_ids"))
    return errors


def check_create(body: dict[str, Any]) -> list[dict[str, Any]]:
    errors: list[dict[str, Any]] = []
    if "input" not in body:
        errors.append(missing("input"))
    else:
        errors += _check_input(body["input"])
    if "model" not in body:
        errors.append(missing("model"))
    else:
        errors += _string(body["model"], "model")
    errors += _check_tools(body.get("tools"))
    for key in ("previous_response_id", "instructions"):
        if body.get(key) is not None:
            errors += _string(body[key], key)
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        errors.append({"loc": ["body", "metadata"], "msg": "Input should be a valid "
                       "dictionary", "type": "dict_type"})
    return errors
