"""The `POST /v1/responses` request: LCORE's `ResponsesRequest` (spec 001), validated so
a bad request is refused with FastAPI's 422 body before anything is created or sent
upstream.

The fields LCORE defines come first, in LCORE's order and with LCORE's lax types, so
every error LCORE reports for them is reported identically (`errors()` follows field
order). The OpenAI fields LCORE lacks come after them; they are accepted here, where
LCORE refuses them as unknown.

The model validates and is what the gateway decides with; the raw JSON object is what
gets forwarded (after the turn's changes, `turns/body.py`), so nested objects reach the upstream as
the client sent them. Top-level scalars lax validation converted (`"stream": "true"`)
are forwarded in their converted form (`forwarded_scalars`), and so are those inside the
client's tools (`converted_scalars`: `"strict": 0`), which the response echoes.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator, model_validator

from gateway.schema.ids import normalize_conversation_id
from gateway.schema.json_types import JsonObject
from gateway.schema.limits import RequestLimits, check_counts
from gateway.schema.responses_tools import CONFIGURED_MCP_SERVERS, InputTool, ToolChoice
from gateway.schema.responses_types import (OpenAIResponsePrompt, OpenAIResponseReasoning, OpenAIResponseText,
                                            ResponseInput, ResponseItem)
from gateway.schema.fail_fast import validate

IncludeParameter = Literal[
    "web_search_call.action.sources", "code_interpreter_call.outputs",
    "computer_call_output.output.image_url", "file_search_call.results", "message.input_image.image_url", "message.output_text.logprobs",
    "reasoning.encrypted_content",
]
# LCORE extensions (spec 001): consumed by the gateway, never forwarded.
LCORE_EXTENSIONS = ("generate_topic_summary", "solr", "shield_ids")


class SolrVectorSearchRequest(BaseModel):
    """LCORE's Solr inline-RAG options; a bare filter object is the legacy form."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["semantic", "hybrid", "lexical", "keyword"] | None = None
    filters: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_filters(cls, data: Any) -> Any:
        if isinstance(data, dict) and "filters" not in data and "mode" not in data:
            return {"mode": None, "filters": data}
        return data


class ResponsesRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # LCORE's fields, in LCORE's order.
    input: ResponseInput
    model: str | None = None
    conversation: str | None = None
    include: list[IncludeParameter] | None = None
    instructions: str | None = None
    max_infer_iters: int | None = Field(None, ge=1)
    max_output_tokens: int | None = Field(None, ge=1)
    max_tool_calls: int | None = Field(None, ge=1)
    metadata: dict[str, str] | None = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None
    prompt: OpenAIResponsePrompt | None = None
    reasoning: OpenAIResponseReasoning | None = None
    safety_identifier: str | None = None
    store: bool = True
    stream: bool = False
    temperature: float | None = Field(None, ge=0, le=2)
    text: OpenAIResponseText | None = None
    tool_choice: ToolChoice | None = None
    tools: list[InputTool] | None = None
    generate_topic_summary: bool | None = True
    shield_ids: list[str] | None = None
    solr: SolrVectorSearchRequest | None = None
    # OpenAI's fields LCORE does not have.
    top_p: float | None = Field(None, ge=0, le=1)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    background: bool | None = None
    prompt_cache_key: str | None = None
    service_tier: str | None = None
    truncation: Literal["auto", "disabled"] | None = None
    stream_options: dict[str, Any] | None = None
    guardrails: list[Any] | None = None

    @field_validator("conversation", mode="before")
    @classmethod
    def _conversation_object(cls, value: Any) -> Any:
        # Ours: the `openai` package sends `{"id": ...}` (spec README: all forms accepted).
        if isinstance(value, dict):
            if not isinstance(value.get("id"), str):
                raise ValueError("the conversation object needs an `id` string")
            return value["id"]
        return value

    @field_validator("conversation")
    @classmethod
    def _conversation_id(cls, value: str | None) -> str | None:
        if value and normalize_conversation_id(value) is None:
            raise ValueError(f"Improper conversation ID '{value}'")
        return value

    @field_validator("previous_response_id")
    @classmethod
    def _not_a_moderation(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("modr"):
            raise ValueError("You cannot provide context by moderation response.")
        return value

    @model_validator(mode="after")
    def _one_way_to_continue(self) -> "ResponsesRequest":
        if self.conversation and self.previous_response_id:
            raise ValueError("`conversation` and `previous_response_id` are mutually exclusive. "
                             "Only one can be provided at a time.")
        return self

    @cached_property
    def conversation_id(self) -> str | None:
        """The conversation id normalised to the gateway's form (bare 48 hex or UUID);
        None when absent (LCORE treats an empty string as absent too)."""
        return normalize_conversation_id(self.conversation) if self.conversation else None

    @property
    def previous_id(self) -> str | None:
        return self.previous_response_id or None


class ItemReference(BaseModel):
    """OpenAI's `item_reference` input item: an earlier item of the conversation, by id.
    Llama Stack 0.7.3 (and so LCORE) has no such item; the local engine resolves it."""

    id: str
    type: Literal["item_reference"] = "item_reference"


class EngineResponsesRequest(ResponsesRequest):
    """The request in engine mode: LCORE's, with `item_reference` input items accepted.
    A separate model, so forward mode keeps LCORE's exact 422 bodies (every member of
    the input union is reported in them)."""

    # A wider list than the base's: pydantic re-declares a field, mypy holds a mutable attribute invariant.
    input: str | list[ResponseItem | ItemReference]  # type: ignore[assignment]


_ADAPTER = TypeAdapter(ResponsesRequest)
_ENGINE_ADAPTER = TypeAdapter(EngineResponsesRequest)
# Top-level scalars: lax validation may have converted what the client sent (`"0.5"`,
# `"true"`, `3.0`), and the upstream gets the converted value.
_SCALARS = ("model", "instructions", "max_infer_iters", "max_output_tokens", "max_tool_calls",
            "parallel_tool_calls", "previous_response_id", "safety_identifier", "store", "stream", "temperature",
            "top_p", "top_logprobs", "frequency_penalty", "presence_penalty", "background", "prompt_cache_key",
            "service_tier")


def parse_responses_request(raw: Any, configured_mcp: Mapping[str, str] | None = None,
                            engine: bool = False, limits: RequestLimits | None = None) -> ResponsesRequest:
    """Validate a decoded JSON body, or raise FastAPI's 422 for it. `configured_mcp`
    maps the operator's MCP server names to their URLs (see `InputToolMCP`); `engine`:
    the turn runs on the local engine, which also takes `item_reference` items;
    `limits`: the operator's caps on `input`, `tools` and `include`, checked first
    (`TurnService.limits`; None: the caller checked them)."""
    if limits is not None:
        check_counts(raw, limits.responses())
    context = {CONFIGURED_MCP_SERVERS: configured_mcp or {}}
    if engine:
        return validate(_ENGINE_ADAPTER, raw, context)
    return validate(_ADAPTER, raw, context)


def provider_data_header(solr: Any) -> str:
    """`X-LlamaStack-Provider-Data` with the client's `solr` object, which Llama Stack
    parses as JSON: every character outside printable ASCII escaped (`\\uXXXX`), so the
    value arrives intact. A header is Latin-1 on the wire (aiohttp cannot send anything
    else) and an HTTP parser refuses control characters and DEL in one."""
    return json.dumps({"solr": solr}, ensure_ascii=True, separators=(",", ":")).replace("\x7f", "\\u007f")


def forwarded_scalars(raw: JsonObject, request: ResponsesRequest) -> JsonObject:
    """The top-level scalars whose validated value differs in type from what was sent."""
    changed = {}
    for name in _SCALARS:
        if name in raw:
            value = getattr(request, name)
            if type(value) is not type(raw[name]):
                changed[name] = value
    return changed


_SCALAR_TYPES = (bool, int, float, str)
_ABSENT = object()


def converted_scalars(raw: Any, validated: Any) -> Any:
    """`raw` (JSON as the client sent it) with every scalar that lax validation converted
    (`"strict": 0`, `"score_threshold": false`) replaced by its validated value, at any
    depth; `raw` itself when nothing was converted. `validated` is the model (or value)
    validation made of it; a key that is not a field name (an alias) is left as sent.
    What is forwarded, and echoed in the response, then has the types the response
    declares (found by schemathesis: tests/e2e/test_schemathesis.py)."""
    if isinstance(raw, dict):
        if isinstance(validated, BaseModel):
            fields = validated.__dict__
        elif isinstance(validated, dict):
            fields = validated
        else:
            return raw
        changed: dict[str, Any] | None = None
        for key, value in raw.items():
            new = converted_scalars(value, fields.get(key, _ABSENT))
            if new is not value:
                changed = changed if changed is not None else dict(raw)
                changed[key] = new
        return changed if changed is not None else raw
    if isinstance(raw, list) and isinstance(validated, (list, tuple)) and len(raw) == len(validated):
        items = [converted_scalars(item, model) for item, model in zip(raw, validated)]
        return items if any(new is not old for new, old in zip(items, raw)) else raw
    if (isinstance(raw, _SCALAR_TYPES) and type(validated) in _SCALAR_TYPES  # not an enum member
            and type(raw) is not type(validated)):
        return validated
    return raw
