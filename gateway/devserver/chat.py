"""Role 1: the OpenAI-compatible inference backend behind a real Llama Stack.

Llama Stack's `remote::vllm` provider points at /v1 here: /v1/models, /health,
/v1/chat/completions (stream and not) and /v1/embeddings. Errors use the OpenAI body
`{"error": {"message", "type", "param", "code"}}`.

Streams: a role chunk, one chunk per word (or per 16-character piece of tool-call
arguments, after a chunk that carries the call id and name), a finish chunk, a usage
chunk when `stream_options.include_usage`, then `data: [DONE]`. Triggers in the last
user text (`triggers.py`) add `reasoning_content` (think-aloud), a call of every tool
in one turn (parallel-calls) or end with `length` / `content_filter`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import orjson
from aiohttp import web

from . import sse, triggers
from .embeddings import DEFAULT_DIM, embed, encode_base64, input_texts
from .model import (ToolSpec, chunk16, content_text, count_words, decide, make_arguments, new_call_id,
                    split_words)
from .shapes import json_response
from .state import STATE, ServerState

# scripted-mini is a second LLM (same scripted replies) so model selection can be observed.
CHAT_MODELS = frozenset({"scripted-chat", "scripted/scripted-chat", "scripted-mini", "scripted/scripted-mini"})
EMBED_MODELS = frozenset({"scripted-embed", "scripted/scripted-embed"})
CREATED = int(time.time())
MODELS_BODY = orjson.dumps({"object": "list", "data": [
    {"id": "scripted-chat", "object": "model", "created": CREATED, "owned_by": "scripted",
     "custom_metadata": {"model_type": "llm"}},
    {"id": "scripted-embed", "object": "model", "created": CREATED, "owned_by": "scripted",
     "custom_metadata": {"model_type": "embedding", "embedding_dimension": DEFAULT_DIM}},
    {"id": "scripted-mini", "object": "model", "created": CREATED, "owned_by": "scripted",
     "custom_metadata": {"model_type": "llm"}},
]})
HEALTH_BODY = orjson.dumps({"status": "OK"})
DONE = b"data: [DONE]\n\n"


def openai_error(message: str, status: int, type_: str, code: Any = None,
                 param: str | None = None) -> web.Response:
    return json_response({"error": {"message": message, "type": type_, "param": param,
                                    "code": code}}, status)


def model_missing(model: Any) -> web.Response:
    return openai_error(f"The model `{model}` does not exist.", 404, "invalid_request_error",
                        "model_not_found", "model")


def bad_request(message: str, param: str | None = None) -> web.Response:
    return openai_error(message, 400, "invalid_request_error", None, param)


async def json_body(request: web.Request) -> dict[str, Any] | web.Response:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        return bad_request(f"Invalid JSON body: {exc}")
    if not isinstance(body, dict):
        return bad_request("The request body must be a JSON object.")
    return body


async def health(request: web.Request) -> web.Response:
    return web.Response(body=HEALTH_BODY, content_type="application/json")


# What a plain OpenAI-compatible server (vLLM) lists: its chat models, without Llama
# Stack's `custom_metadata` (the --no-responses mode).
PLAIN_MODELS_BODY = orjson.dumps({"object": "list", "data": [
    {"id": model["id"], "object": "model", "created": CREATED, "owned_by": "vllm"}
    for model in orjson.loads(MODELS_BODY)["data"] if model["custom_metadata"]["model_type"] == "llm"]})


# Llama Stack 0.7.3's names (the --provider-ids mode): `<provider>/<model>` ids, the
# provider and the provider's own id in `custom_metadata`.
PROVIDER = "scripted"
PROVIDER_MODELS_BODY = orjson.dumps({"object": "list", "data": [
    {**model, "id": f"{PROVIDER}/{model['id']}",
     "custom_metadata": {**model["custom_metadata"], "provider_id": PROVIDER, "provider_resource_id": model["id"]}}
    for model in orjson.loads(MODELS_BODY)["data"]]})


def _models_body(state: ServerState) -> bytes:
    if not state.responses_enabled:
        return PLAIN_MODELS_BODY
    return PROVIDER_MODELS_BODY if state.provider_ids else MODELS_BODY


async def list_models(request: web.Request) -> web.Response:
    return web.Response(body=_models_body(request.app[STATE]), content_type="application/json")


async def get_model(request: web.Request) -> web.Response:
    model_id = request.match_info["model_id"]
    for model in orjson.loads(_models_body(request.app[STATE]))["data"]:
        if model["id"] == model_id:
            return json_response(model)
    return model_missing(model_id)


def _tool_specs(tools: Any) -> list[ToolSpec]:
    specs = []
    for tool in tools or ():
        fn = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            specs.append(ToolSpec(fn["name"], fn.get("parameters")))
    return specs


async def chat_completions(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    model = body.get("model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) for m in messages):
        return bad_request("`messages` must be a non-empty list of message objects.",
                            "messages")
    if model not in CHAT_MODELS:
        return model_missing(model)
    knobs = triggers.read_knobs(body.get("metadata"), state.delay_ms)
    if knobs.deltas is None:
        knobs.deltas = state.chat_deltas
    trigger = triggers.find_trigger(content_text(messages[-1].get("content")))
    if trigger is None and messages[0].get("role") == "system":
        trigger = triggers.find_trigger(content_text(messages[0].get("content")))
    stream = body.get("stream") is True
    if trigger in triggers.STATUS_ANSWERS:
        status, headers = triggers.STATUS_ANSWERS[trigger]
        answer = openai_error(f"scripted {status}", status, "server_error")
        answer.headers.update(headers)
        return answer
    if trigger == triggers.HANG_UPSTREAM:
        await sse.wait_for_disconnect(request)
        return web.Response(status=504)
    if trigger == triggers.FAIL_UPSTREAM:
        return openai_error(triggers.UPSTREAM_FAILURE_MESSAGE, 500, "server_error")
    if trigger == triggers.ECHO_ERROR and not stream:
        return openai_error(triggers.echo_of(request.headers, body), 400, "invalid_request_error")
    if trigger == triggers.CONTEXT_OVERFLOW:
        return openai_error(triggers.CONTEXT_OVERFLOW_MESSAGE, 400, "invalid_request_error",
                            "context_length_exceeded", "messages")
    specs = _tool_specs(body.get("tools"))
    reply = decide(messages, specs, tool_choice=body.get("tool_choice"), deltas=knobs.deltas)
    completion_id = "chatcmpl-" + uuid.uuid4().hex[:24]
    created = int(time.time())
    calls = _calls(reply, specs, messages, trigger == triggers.PARALLEL_CALLS)
    reasoning = ("Thinking about: " + content_text(messages[-1].get("content"))
                 if trigger == triggers.THINK_ALOUD and not calls else None)
    finish_reason = {triggers.FINISH_LENGTH: "length", triggers.CONTENT_FILTER: "content_filter"}.get(
        trigger or "", "tool_calls" if calls else "stop")
    completion_tokens = reply.completion_tokens + sum(count_words(c[2]) for c in calls[1:]) \
        + (count_words(reasoning) if reasoning else 0)
    usage: dict[str, Any] = {"prompt_tokens": reply.prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": reply.prompt_tokens + completion_tokens}
    if reasoning:
        usage["completion_tokens_details"] = {"reasoning_tokens": count_words(reasoning)}
    if not stream:
        if knobs.delay_s:
            await asyncio.sleep(knobs.delay_s)
        if calls:
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
                for call_id, name, arguments in calls]}
        else:
            message = {"role": "assistant", "content": reply.text}
            if reasoning:
                message["reasoning_content"] = reasoning
        return json_response({
            "id": completion_id, "object": "chat.completion", "created": created,
            "model": model, "choices": [{"index": 0, "message": message, "logprobs": None,
                                         "finish_reason": finish_reason}],
            "usage": usage, "system_fingerprint": "scripted"})

    head = orjson.dumps({"id": completion_id, "object": "chat.completion.chunk",
                         "created": created, "model": model,
                         "system_fingerprint": "scripted"})[:-1]
    prefix = b"data: " + head + b',"choices":[{"index":0,"delta":'
    open_tail = b',"logprobs":null,"finish_reason":null}]}\n\n'

    def chunk(delta: dict[str, Any]) -> bytes:
        return prefix + orjson.dumps(delta) + open_tail

    frames = [chunk({"role": "assistant", "content": ""})]
    if trigger == triggers.STALL_STREAM:
        resp = await sse.start(request)
        await sse.write_frames(resp, frames, knobs.delay_s)
        await sse.wait_for_disconnect(request)
        return resp
    if trigger in (triggers.ERROR_EVENT, triggers.ECHO_ERROR, triggers.ECHO_ERROR_FIRST):
        error_message = triggers.ERROR_EVENT_MESSAGE if trigger == triggers.ERROR_EVENT \
            else triggers.echo_of(request.headers, body)
        if trigger == triggers.ECHO_ERROR_FIRST:
            frames.clear()  # the error is the stream's first chunk
        frames.append(b"data: " + orjson.dumps({"error": {
            "message": error_message, "type": "server_error", "param": None, "code": 500}}) + b"\n\n")
        frames.append(DONE)
    elif calls:
        for index, (call_id, name, arguments) in enumerate(calls):
            frames.append(chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                                 "function": {"name": name, "arguments": ""}}]}))
            for piece in chunk16(arguments):
                frames.append(chunk({"tool_calls": [{"index": index,
                                                     "function": {"arguments": piece}}]}))
    else:
        for piece in split_words(reasoning or ""):
            frames.append(chunk({"reasoning_content": piece}))
        pieces = reply.pieces if reply.pieces is not None else split_words(reply.text or "")
        if trigger in (triggers.BREAK_STREAM, triggers.RESET_STREAM):
            pieces = pieces[:triggers.BREAK_AFTER_DELTAS]
        frames.extend(prefix + b'{"content":' + orjson.dumps(p) + b"}" + open_tail
                      for p in pieces)
    if trigger not in (triggers.BREAK_STREAM, triggers.RESET_STREAM, triggers.ERROR_EVENT, triggers.ECHO_ERROR, triggers.ECHO_ERROR_FIRST):
        finish = orjson.dumps(finish_reason)
        frames.append(prefix + b'{},"logprobs":null,"finish_reason":' + finish + b"}]}\n\n")
        options = body.get("stream_options")
        if isinstance(options, dict) and options.get("include_usage"):
            frames.append(b"data: " + head + b',"choices":[],"usage":' + orjson.dumps(usage)
                          + b"}\n\n")
        frames.append(DONE)
    frames = triggers.malform(trigger, frames, 1)  # after the role chunk
    resp = await sse.start(request)
    await sse.write_frames(resp, frames, knobs.delay_s)
    if trigger == triggers.RESET_STREAM:
        triggers.reset(request)
    else:
        await sse.finish(resp)
    return resp


def _calls(reply: Any, specs: list[ToolSpec], messages: list[dict[str, Any]],
           parallel: bool) -> list[tuple[str, str, str]]:
    """The reply's tool calls as (call id, name, arguments); with `parallel-calls`, one
    call of every tool in one turn."""
    if not reply.tool_name:
        return []
    if not parallel:
        return [(new_call_id(), reply.tool_name, reply.arguments or "{}")]
    text = content_text(messages[-1].get("content"))
    return [(new_call_id(), spec.name, json.dumps(make_arguments(spec.parameters, text))) for spec in specs]


async def embeddings(request: web.Request) -> web.Response:
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    model = body.get("model")
    if model not in EMBED_MODELS:
        return model_missing(model)
    texts = input_texts(body.get("input"))
    if texts is None:
        return bad_request("`input` must be a string, a list of strings or token arrays.",
                            "input")
    dim = body.get("dimensions") or DEFAULT_DIM
    if not isinstance(dim, int) or dim < 1 or dim > 8192:
        return bad_request("`dimensions` must be an integer between 1 and 8192.",
                            "dimensions")
    as_base64 = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vec = embed(text, dim)
        data.append({"object": "embedding", "index": index,
                     "embedding": encode_base64(vec) if as_base64 else vec})
    tokens = sum(count_words(t) for t in texts)
    return json_response({"object": "list", "data": data, "model": model,
                          "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
