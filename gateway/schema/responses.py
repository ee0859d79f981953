"""The `POST /v1/responses` request: Llama Stack's create-response fields plus LCORE's
extensions (spec 001), validated strictly so a bad request is refused with 422 before
anything is created or sent upstream.

The model validates; the raw JSON object is what gets forwarded (after the pipeline's
changes), so numbers and nested objects reach the upstream exactly as the client sent
them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr,
                      ValidationError, field_validator)

from gateway.schema.errors import ApiError, validation_error
from gateway.schema.ids import normalize_conversation_id

INCLUDABLE = Literal[
    "file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
    "message.input_image.image_url", "computer_call_output.output.image_url",
    "code_interpreter_call.outputs", "reasoning.encrypted_content", "message.output_text.logprobs",
]
INPUT_ITEM_TYPES = {
    "message", "web_search_call", "file_search_call", "function_call", "function_call_output",
    "mcp_call", "mcp_list_tools", "mcp_approval_request", "mcp_approval_response", "reasoning",
    "item_reference",
}
MESSAGE_ROLES = {"user", "assistant", "system", "developer"}
CONTENT_PART_TYPES = {"input_text", "input_image", "input_file", "input_audio", "output_text", "refusal"}
WEB_SEARCH_TYPES = {"web_search", "web_search_preview", "web_search_preview_2025_03_11",
                    "web_search_2025_08_26"}
TOOL_TYPES = {"function", "file_search", "mcp"} | WEB_SEARCH_TYPES
TOOL_CHOICE_MODES = {"auto", "required", "none"}
TOOL_CHOICE_TYPES = {"allowed_tools", "file_search", "function", "mcp", "custom"} | WEB_SEARCH_TYPES
LCORE_EXTENSIONS = ("generate_topic_summary", "solr")


def _require(item: dict, key: str, kind: type | tuple, where: str) -> None:
    if key not in item:
        raise ValueError(f"{where}.{key}: Field required")
    if not isinstance(item[key], kind) or isinstance(item[key], bool) and kind is not bool:
        raise ValueError(f"{where}.{key}: wrong type")


def _check_message(item: dict, where: str) -> None:
    if item.get("role") not in MESSAGE_ROLES:
        raise ValueError(f"{where}.role: must be one of {sorted(MESSAGE_ROLES)}")
    content = item.get("content")
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise ValueError(f"{where}.content: must be a string or a list of content parts")
    for index, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") not in CONTENT_PART_TYPES:
            raise ValueError(f"{where}.content[{index}].type: must be one of {sorted(CONTENT_PART_TYPES)}")


def _check_input_item(item: Any, where: str) -> None:
    if not isinstance(item, dict):
        raise ValueError(f"{where}: must be an object (an input item)")
    kind = item.get("type", "message")
    if kind not in INPUT_ITEM_TYPES:
        raise ValueError(f"{where}.type: unknown input item type {kind!r}")
    if kind == "message":
        _check_message(item, where)
    elif kind == "function_call":
        _require(item, "call_id", str, where)
        _require(item, "name", str, where)
        _require(item, "arguments", str, where)
    elif kind == "function_call_output":
        _require(item, "call_id", str, where)
        if not isinstance(item.get("output"), (str, list)):
            raise ValueError(f"{where}.output: must be a string or a list of content parts")
    elif kind == "mcp_approval_response":
        _require(item, "approval_request_id", str, where)
        _require(item, "approve", bool, where)
    elif kind in ("mcp_call", "mcp_list_tools", "mcp_approval_request"):
        _require(item, "server_label", str, where)


def _check_tool(tool: Any, where: str) -> None:
    if not isinstance(tool, dict):
        raise ValueError(f"{where}: must be an object (a tool)")
    kind = tool.get("type")
    if kind not in TOOL_TYPES:
        raise ValueError(f"{where}.type: unknown tool type {kind!r}; one of {sorted(TOOL_TYPES)}")
    if kind == "function":
        _require(tool, "name", str, where)
    elif kind == "file_search":
        _require(tool, "vector_store_ids", list, where)
        if not all(isinstance(v, str) for v in tool["vector_store_ids"]):
            raise ValueError(f"{where}.vector_store_ids: must be a list of strings")
        limit = tool.get("max_num_results")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 50):
            raise ValueError(f"{where}.max_num_results: must be an integer from 1 to 50")
    elif kind == "mcp":
        _require(tool, "server_label", str, where)
        for key in ("server_url", "authorization", "connector_id"):
            if tool.get(key) is not None and not isinstance(tool[key], str):
                raise ValueError(f"{where}.{key}: must be a string")
        if tool.get("headers") is not None and not isinstance(tool["headers"], dict):
            raise ValueError(f"{where}.headers: must be an object")


class ResponsesRequest(BaseModel):
    """Validated view of a create-response body; unknown top-level fields are refused."""

    model_config = ConfigDict(extra="forbid")

    input: Any
    model: StrictStr | None = None
    conversation: StrictStr | dict[str, Any] | None = None
    previous_response_id: StrictStr | None = None
    include: list[INCLUDABLE] | None = None
    instructions: StrictStr | None = None
    max_infer_iters: StrictInt | None = Field(None, ge=1)
    max_tool_calls: StrictInt | None = Field(None, ge=1)
    max_output_tokens: StrictInt | None = Field(None, ge=1)
    metadata: dict[str, StrictStr] | None = None
    parallel_tool_calls: StrictBool | None = None
    prompt: dict[str, Any] | None = None
    store: StrictBool = True
    stream: StrictBool = False
    background: StrictBool | None = None
    temperature: StrictFloat | StrictInt | None = Field(None, ge=0, le=2)
    top_p: StrictFloat | StrictInt | None = Field(None, ge=0, le=1)
    top_logprobs: StrictInt | None = Field(None, ge=0, le=20)
    frequency_penalty: StrictFloat | StrictInt | None = Field(None, ge=-2, le=2)
    presence_penalty: StrictFloat | StrictInt | None = Field(None, ge=-2, le=2)
    text: dict[str, Any] | None = None
    tool_choice: StrictStr | dict[str, Any] | None = None
    tools: list[Any] | None = None
    reasoning: dict[str, Any] | None = None
    safety_identifier: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    service_tier: StrictStr | None = None
    truncation: Literal["auto", "disabled"] | None = None
    stream_options: dict[str, Any] | None = None
    guardrails: list[Any] | None = None
    # LCORE extensions (spec 001): consumed by the gateway, never forwarded.
    generate_topic_summary: StrictBool | None = None
    solr: dict[str, Any] | None = None

    @field_validator("input")
    @classmethod
    def _input_items(cls, value: Any) -> str | list[Any]:
        if not isinstance(value, (str, list)):
            raise ValueError("must be a string or a list of input items")
        if isinstance(value, list):
            for index, item in enumerate(value):
                _check_input_item(item, f"input[{index}]")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[Any] | None) -> list[Any] | None:
        for index, tool in enumerate(value or []):
            _check_tool(tool, f"tools[{index}]")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str | dict | None) -> str | dict | None:
        if isinstance(value, str) and value not in TOOL_CHOICE_MODES:
            raise ValueError(f"must be one of {sorted(TOOL_CHOICE_MODES)} or a tool choice object")
        if isinstance(value, dict) and value.get("type") not in TOOL_CHOICE_TYPES:
            raise ValueError(f"type must be one of {sorted(TOOL_CHOICE_TYPES)}")
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt(cls, value: dict | None) -> dict | None:
        if value is not None and not isinstance(value.get("id"), str):
            raise ValueError("prompt.id: Field required (a string)")
        return value

    @field_validator("conversation")
    @classmethod
    def _conversation(cls, value: str | dict | None) -> str | None:
        if isinstance(value, dict):
            value = value.get("id")
            if not isinstance(value, str):
                raise ValueError("the conversation object needs an `id` string")
        if value is not None and normalize_conversation_id(value) is None:
            raise ValueError(f"Improper conversation ID '{value}'")
        return value

    @field_validator("previous_response_id")
    @classmethod
    def _previous(cls, value: str | None) -> str | None:
        if value is not None and value.startswith("modr"):
            raise ValueError("You cannot provide context by moderation response.")
        if value is not None and not value.strip():
            raise ValueError("must not be empty")
        return value

    @property
    def conversation_id(self) -> str | None:
        """The conversation id normalised to the gateway's form (bare 48 hex or UUID)."""
        return normalize_conversation_id(self.conversation) if self.conversation else None


_CODES = {"missing": "missing_required_parameter", "extra_forbidden": "unknown_parameter"}


def parse_responses_request(raw: Any) -> ResponsesRequest:
    """Validate a decoded JSON body, or raise the 422 `ApiError` that names the field."""
    if not isinstance(raw, dict):
        raise validation_error("The request body must be a JSON object.", code="invalid_body")
    if raw.get("conversation") is not None and raw.get("previous_response_id") is not None:
        raise validation_error("`conversation` and `previous_response_id` are mutually exclusive. "
                               "Only one can be provided at a time.",
                               param="previous_response_id", code="conflicting_parameters")
    try:
        return ResponsesRequest.model_validate(raw)
    except ValidationError as exc:
        raise _to_api_error(exc) from None


def _to_api_error(exc: ValidationError) -> ApiError:
    first = exc.errors()[0]
    param = _where(first).split(".")[0].split("[")[0]
    param = None if param == "body" else param
    causes = [_describe(error) for error in exc.errors()]
    cause = "; ".join(dict.fromkeys(causes))
    return validation_error(cause, param=param, code=_CODES.get(first["type"], "invalid_value"))


def _describe(error: dict) -> str:
    where = _where(error)
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown parameter (extra inputs are not permitted)"
    message = error["msg"].removeprefix("Value error, ")
    # Item validators already name the item ("tools[0].type: ...").
    return message if message.startswith(where.split(".")[0] + "[") else f"{where}: {message}"


def _where(error: dict) -> str:
    # Drop pydantic's union-branch labels ("str", "list[any]", "function-after[...]").
    kept = [str(part) for part in error["loc"] if str(part) not in _BRANCH_LABELS
            and not str(part).startswith(_BRANCH_PREFIXES)]
    return ".".join(kept) or "body"


_BRANCH_LABELS = {"str", "int", "float", "bool", "none"}
_BRANCH_PREFIXES = ("list[", "dict[", "function-", "literal[", "union[", "constrained-")
