"""Responses ⇄ Chat Completions, as pure functions (sans-I/O, as
docs/architecture.md's "The local engine" lists it).

Request side: the conversation's items (history, then this request's input) become
chat `messages`; tools, `tool_choice`, `text.format` and the sampling options become
their Chat Completions forms. Anything the engine cannot express to a Chat Completions
server is refused here with a 422 (`unsupported`) before anything is created. The mistakes other gateways made and this module avoids are listed in
docs/engine.md: string input and items without `type` are messages,
`developer` is a system message, consecutive `function_call`s are one assistant
message, a forced `tool_choice` takes Chat Completions' nested form, usage is read
from the trailing usage chunk.

Response side (`usage_of`, `incomplete_reason`) maps what the upstream reported back.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import orjson

from gateway.engine import file_search
from gateway.schema.errors import ApiError, invalid_attribute
from gateway.schema.json_types import ResponseUsage
from gateway.schema.responses_tools import WEB_SEARCH_TYPES

# Item types that carry nothing a chat model reads (tool listings, approvals are
# decided before the model runs again).
_SKIPPED_ITEMS = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
# Looked up with a message's `role` as the client sent it (any JSON value).
_ROLES: dict[Any, str] = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}


def unsupported(cause: str, param: str = "input") -> ApiError:
    """What the engine cannot send to a Chat Completions server: LCORE's 422 shape."""
    return invalid_attribute(cause, param=param, code="unsupported_by_engine")


def input_items(input_: Any) -> list[dict[str, Any]]:
    """The request's `input` as items: a string is one user message, an item without
    `type` is a message (the SDK's EasyInputMessage)."""
    if isinstance(input_, str):
        return [{"type": "message", "role": "user", "content": input_}]
    items = []
    for item in input_ or ():
        if isinstance(item, dict):
            items.append(item if "type" in item else {"type": "message", **item})
    return items


def to_messages(items: Iterable[dict[str, Any]], instructions: str | None = None,
                references: Mapping[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Chat messages for the items, in order, `instructions` first as a system message.
    `references` resolves `item_reference` items by id (None: leave them for later).

    Consecutive tool calls (`function_call`, and earlier turns' `mcp_call` /
    `file_search_call`) become ONE assistant message with every call, followed by one
    `tool` message per result, which strict servers (vLLM's templates) require."""
    messages: list[dict[str, Any]] = []
    if instructions:
        messages.append({"role": "system", "content": instructions})
    pending_calls: list[dict[str, Any]] | None = None  # the open assistant message's tool_calls

    def calls() -> list[dict[str, Any]]:
        nonlocal pending_calls
        if pending_calls is None:
            pending_calls = []
            messages.append({"role": "assistant", "content": None, "tool_calls": pending_calls})
        return pending_calls

    for item in items:
        kind = item.get("type")
        if kind == "item_reference":
            if references is None:  # checked before the history is read: resolved later
                continue
            found = references.get(str(item.get("id")))
            if found is None:
                raise unsupported(f"item_reference {item.get('id')!r} names no item of this conversation")
            item, kind = found, found.get("type")
        if kind in _SKIPPED_ITEMS:
            continue
        if kind == "function_call":
            calls().append(_tool_call(item.get("call_id"), item.get("name"), item.get("arguments")))
            continue
        if kind == "mcp_call":
            call_id = str(item.get("id"))
            calls().append(_tool_call(call_id, item.get("name"), item.get("arguments")))
            output = item.get("output") if item.get("error") is None else _error_text(item.get("error"))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(output)})
            pending_calls = None
            continue
        if kind == "file_search_call":
            # As the model read it: the chunks with their citation markers.
            call_id = str(item.get("id"))
            query = " ".join(str(query) for query in item.get("queries") or ())
            calls().append(_tool_call(call_id, file_search.NAME, {"query": query}))
            messages.append({"role": "tool", "tool_call_id": call_id, "content": file_search.history_text(item)})
            pending_calls = None
            continue
        if kind == "web_search_call":  # an earlier search: the call, and where it looked
            call_id = str(item.get("id"))
            action = item.get("action")
            if not isinstance(action, dict):
                action = {}
            calls().append(_tool_call(call_id, "web_search", {"query": action.get("query") or ""}))
            sources = [source.get("url") for source in action.get("sources") or () if isinstance(source, dict)]
            messages.append({"role": "tool", "tool_call_id": call_id, "content": (
                f"Searched ({item.get('status')})" + (": " + ", ".join(map(str, sources)) if sources else ""))})
            pending_calls = None
            continue
        pending_calls = None  # anything but a call ends the assistant message of calls
        if kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"),
                             "content": _text(item.get("output"))})
            continue
        if kind == "message":
            messages.append(_message(item))
            continue
        raise unsupported(f"Input items of type {kind!r} are not supported by the local engine")
    return messages


def _tool_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        arguments = orjson.dumps(arguments if arguments is not None else {}).decode()
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return "Error: " + str(error.get("message") or orjson.dumps(error).decode())
    return f"Error: {error}"


def _text(value: Any) -> str:
    """A tool result as the text a `tool` message carries."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # output as content parts
        return "".join(part.get("text") or "" for part in value if isinstance(part, dict))
    return orjson.dumps(value).decode()


def _message(item: dict[str, Any]) -> dict[str, Any]:
    role = _ROLES.get(item.get("role"))
    if role is None:
        raise unsupported(f"Messages with role {item.get('role')!r} are not supported")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise unsupported("A message's content must be a string or a list of parts")
    if role == "assistant":
        # Chat Completions' assistant content is text; a refusal has its own field.
        text = "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") in _TEXT_PARTS)
        refusal = "".join(p.get("refusal") or "" for p in content if isinstance(p, dict) and p.get("type") == "refusal")
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if refusal:
            message["refusal"] = refusal
        return message
    parts = [_part(part) for part in content if isinstance(part, dict)]
    if role == "system":
        # System messages take text only.
        if any(part["type"] != "text" for part in parts):
            raise unsupported("System and developer messages can only contain text")
    return {"role": role, "content": parts}


def _part(part: dict[str, Any]) -> dict[str, Any]:
    kind = part.get("type")
    if kind in _TEXT_PARTS:
        return {"type": "text", "text": part.get("text") or ""}
    if kind == "input_image":
        url = part.get("image_url")
        if isinstance(url, dict):  # some clients send Chat Completions' object form
            url = url.get("url")
        if not isinstance(url, str) or not url:
            if part.get("file_id"):
                raise unsupported("input_image by file_id needs the Files API, which the local engine "
                                       "does not have; send image_url (a URL or a data: URL)")
            raise unsupported("input_image needs an image_url (a URL or a data: URL)")
        image: dict[str, Any] = {"url": url}
        if part.get("detail") in ("low", "high", "auto"):
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        # Chat Completions' `file` part takes inline data or an uploaded file's id; a URL
        # it cannot fetch.
        if part.get("file_url"):
            raise unsupported("input_file by file_url is not supported by Chat Completions upstreams; "
                                   "send file_data (base64) with a filename")
        file = {key: part[key] for key in ("file_data", "file_id", "filename") if part.get(key)}
        if not file.get("file_data") and not file.get("file_id"):
            raise unsupported("input_file needs file_data or file_id")
        return {"type": "file", "file": file}
    if kind == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio") or {}}
    raise unsupported(f"Content parts of type {kind!r} are not supported by the local engine")


# Tool types the engine runs itself: their tools reach the model once listed
# (`mcp_tools.py`) or as the function that stands for them (`file_search.offer`,
# `web_search.py`, which renames it on a clash), not from the request.
SERVER_TOOLS = frozenset({"mcp", "file_search", *WEB_SEARCH_TYPES})


def chat_tools(tools: Iterable[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Function tools in Chat Completions' nested form (`strict` kept). MCP tools are
    listed by the engine; other tool types need an executor this version lacks."""
    out = []
    tools = list(tools or ())
    searches = any(tool.get("type") == "file_search" for tool in tools)
    for tool in tools:
        if tool.get("type") in SERVER_TOOLS:
            continue
        if tool.get("type") != "function":
            raise unsupported(f"Tools of type {tool.get('type')!r} are not supported by the local engine "
                                   "yet (function, mcp, file_search and web_search tools only)", param="tools")
        if searches and tool.get("name") == file_search.NAME:
            raise unsupported(f"A function tool named {file_search.NAME!r} cannot be sent with a file_search tool: "
                              "the model calls file_search by that name", param="tools")
        function: dict[str, Any] = {"name": tool.get("name")}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out


def tool_choice(choice: Any) -> tuple[Any, frozenset[str] | None]:
    """Chat Completions' `tool_choice`, and the tool names the model may call (None: any
    of the request's tools). `allowed_tools` becomes its mode: every tool is still
    sent for context (spec 002) and calls outside the list are refused by the loop."""
    if choice is None or choice in ("auto", "required", "none"):
        return choice, None
    if isinstance(choice, dict):
        kind = choice.get("type")
        if kind == "function" and isinstance(choice.get("name"), str):
            return {"type": "function", "function": {"name": choice["name"]}}, None
        if kind in WEB_SEARCH_TYPES:  # the function web_search.py offers (renamed there on a clash)
            return {"type": "function", "function": {"name": "web_search"}}, None
        if kind == "file_search":  # the hosted tool, forced: the function that stands for it
            return {"type": "function", "function": {"name": file_search.NAME}}, None
        if kind == "mcp" and isinstance(choice.get("server_label"), str):
            return None, None  # forced by mcp_tools.py once the server is listed (the tool's name is known then)
        if kind == "allowed_tools":
            names = frozenset(str(tool.get("name")) if tool.get("type") == "function" else file_search.NAME
                              for tool in choice.get("tools") or ()
                              if isinstance(tool, dict) and tool.get("type") in ("function", "file_search"))
            return ("required" if choice.get("mode") == "required" else "auto"), names
    raise unsupported(f"tool_choice {choice!r} is not supported by the local engine", param="tool_choice")


def response_format(text: Any) -> dict[str, Any] | None:
    """`text.format` as Chat Completions' `response_format` (None: plain text)."""
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return None
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    if fmt["type"] == "json_schema":
        schema: dict[str, Any] = {"name": fmt.get("name") or "response", "schema": fmt.get("schema") or {}}
        for key in ("description", "strict"):
            if fmt.get(key) is not None:
                schema[key] = fmt[key]
        return {"type": "json_schema", "json_schema": schema}
    raise unsupported(f"text.format of type {fmt['type']!r} is not supported", param="text")


# Request option → Chat Completions option, copied when present.
_OPTIONS = (("temperature", "temperature"), ("top_p", "top_p"), ("max_output_tokens", "max_tokens"),
            ("frequency_penalty", "frequency_penalty"), ("presence_penalty", "presence_penalty"),
            ("metadata", "metadata"), ("top_logprobs", "top_logprobs"))


def chat_options(body: Mapping[str, Any], has_tools: bool) -> dict[str, Any]:
    """The sampling and bookkeeping options of a Responses request, in Chat Completions' names."""
    options = {target: body[source] for source, target in _OPTIONS if body.get(source) is not None}
    if "top_logprobs" in options:
        options["logprobs"] = True  # Chat Completions ignores top_logprobs without it
    user = body.get("safety_identifier") or body.get("user")
    if user:
        options["user"] = user
    if has_tools and body.get("parallel_tool_calls") is not None:
        options["parallel_tool_calls"] = body["parallel_tool_calls"]
    reasoning = body.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort"):
        options["reasoning_effort"] = reasoning["effort"]
    fmt = response_format(body.get("text"))
    if fmt is not None:
        options["response_format"] = fmt
    return options


def check_request(body: Mapping[str, Any]) -> None:
    """Refuse, before anything is created, what the engine cannot run (422)."""
    if body.get("prompt") is not None:
        raise unsupported("Stored prompt templates (`prompt`) are not supported by the local engine; "
                               "send the text as `instructions` or input", param="prompt")
    chat_tools(body.get("tools"))
    tool_choice(body.get("tool_choice"))
    response_format(body.get("text"))
    to_messages(input_items(body.get("input")), body.get("instructions"))


def usage_of(chat_usage: Mapping[str, Any] | None) -> ResponseUsage:
    """Chat Completions usage as a Responses `usage` object (details always present:
    the `openai` types require them)."""
    usage = chat_usage or {}
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    cached = int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    reasoning = int(((usage.get("completion_tokens_details") or {}).get("reasoning_tokens")) or 0)
    return {"input_tokens": prompt, "output_tokens": completion,
            "total_tokens": int(usage.get("total_tokens") or prompt + completion),
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": reasoning}}


def add_usage(total: ResponseUsage, more: ResponseUsage) -> ResponseUsage:
    """Usage summed across the loop's rounds (spec 002)."""
    return {"input_tokens": total["input_tokens"] + more["input_tokens"],
            "output_tokens": total["output_tokens"] + more["output_tokens"],
            "total_tokens": total["total_tokens"] + more["total_tokens"],
            "input_tokens_details": {"cached_tokens": total["input_tokens_details"]["cached_tokens"]
                                     + more["input_tokens_details"]["cached_tokens"], "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": total["output_tokens_details"]["reasoning_tokens"]
                                      + more["output_tokens_details"]["reasoning_tokens"]}}


def incomplete_reason(finish_reason: str | None) -> str | None:
    """`finish_reason` → the response's `incomplete_details.reason` (None: it completed)."""
    if finish_reason == "length":
        return "max_output_tokens"
    if finish_reason == "content_filter":
        return "content_filter"
    return None
