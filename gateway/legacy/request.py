"""LCORE's `QueryRequest` (`/v1/query`, `/v1/streaming_query`) and its translation into
the Responses request every turn is prepared from (sans-I/O).

The model is LCORE's, field for field and in LCORE's order, so a bad request gets
FastAPI's 422 list exactly as LCORE gives it (`schema/fail_fast.py`): that includes an
attachment's image checks (an image type with an image content type, base64 within
LCORE's size limit with its content type's magic bytes), a `model_validator` of LCORE's
`Attachment`, so each is a `Value error, ...` entry at `["body", "attachments", <i>]`.
The checks LCORE's handler makes after validation (attachment types, content types) are
its object-shaped 422 (`Invalid attribute value`).

Translation (spec 001's field-mapping table, with lcore.md 2.1 where they differ):
`query` → `input` (text attachments appended as `\\n\\n[Attachment: <type>]\\n<content>`,
images as `input_image` data URLs in one user message), `conversation_id` →
`conversation`, `provider` + `model` → `model` (`provider/model`), `system_prompt` →
`instructions`, `no_tools` → `tool_choice: "none"`, `vector_store_ids` → a
`file_search` tool over them (rag ids are translated by `ConfiguredTools`) beside the
configured MCP servers, and `generate_topic_summary`, `shield_ids`, `solr` as the
Responses request's LCORE extensions.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, TypeAdapter, field_validator, model_validator

from gateway.schema.errors import invalid_attribute
from gateway.schema.ids import normalize_conversation_id
from gateway.schema.json_types import JsonObject
from gateway.schema.limits import RequestLimits, check_counts
from gateway.schema.responses_request import SolrVectorSearchRequest
from gateway.schema.fail_fast import validate

# LCORE's constants, in its order (its messages print them as a Python set).
ATTACHMENT_TYPES = ("alert", "api object", "configuration", "error message", "event", "image", "log",
                    "stack trace")
ATTACHMENT_CONTENT_TYPES = ("text/plain", "application/json", "application/yaml", "application/xml",
                            "image/jpeg", "image/png")
# LCORE's image content types and the signature each must start with.
_IMAGE_SIGNATURES = {"image/png": b"\x89PNG", "image/jpeg": b"\xff\xd8\xff"}
# LCORE's limit on a decoded image; the request body limit (`service.max_request_bytes`)
# is usually far smaller and wins (docs/query-api.md).
MAX_IMAGE_BYTES = 100 * 1024 * 1024


class Attachment(BaseModel):
    model_config = ConfigDict(extra="forbid")

    attachment_type: str
    content_type: str
    content: str

    @model_validator(mode="after")
    def _image(self) -> "Attachment":
        """LCORE's `validate_image_attachment`, message for message: an image type if and
        only if an image content type, then the image's base64, size and signature."""
        signature = _IMAGE_SIGNATURES.get(self.content_type)
        if (signature is not None) != (self.attachment_type == "image"):
            raise ValueError(f"attachment_type and content_type are inconsistent: "
                             f"attachment_type='{self.attachment_type}', content_type='{self.content_type}'")
        if signature is None:
            return self
        try:
            data = base64.b64decode(self.content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"Invalid base64 content for image attachment: {exc}") from exc
        if len(data) > MAX_IMAGE_BYTES:
            raise ValueError(f"Image attachment ({len(data)} bytes) exceeds maximum allowed size "
                             f"({MAX_IMAGE_BYTES} bytes)")
        if not data.startswith(signature):
            raise ValueError(f"Image content does not match declared content_type '{self.content_type}': "
                             "invalid image data")
        return self


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str
    conversation_id: str | None = None
    provider: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    attachments: list[Attachment] | None = None
    no_tools: bool | None = False
    generate_topic_summary: bool | None = True
    media_type: Literal["application/json", "text/plain"] | None = None
    vector_store_ids: list[str] | None = None
    shield_ids: list[str] | None = None
    solr: SolrVectorSearchRequest | None = None

    @field_validator("conversation_id")
    @classmethod
    def _conversation_id(cls, value: str | None) -> str | None:
        if value and normalize_conversation_id(value) is None:
            raise ValueError(f"Improper conversation ID '{value}'")
        return value

    @model_validator(mode="after")
    def _provider_and_model(self) -> "QueryRequest":
        if self.model and not self.provider:
            raise ValueError("Provider must be specified if model is specified")
        if self.provider and not self.model:
            raise ValueError("Model must be specified if provider is specified")
        return self


_ADAPTER = TypeAdapter(QueryRequest)


def parse_query_request(raw: Any, limits: RequestLimits | None = None) -> QueryRequest:
    """LCORE's model (with its attachments' image checks) and its handler's attachment
    checks, or their 422; `limits`: the operator's cap on `attachments`, checked first."""
    if limits is not None:
        check_counts(raw, limits.query())
    request = validate(_ADAPTER, raw)
    for attachment in request.attachments or ():
        check_attachment(attachment)
    return request


def _one_of(values: tuple[str, ...]) -> str:
    return "{" + ", ".join(f"'{value}'" for value in values) + "}"


def check_attachment(attachment: Attachment) -> None:
    """LCORE's handler's metadata checks, made after its model accepted the request
    (the image checks are the model's)."""
    kind, content_type = attachment.attachment_type, attachment.content_type
    if kind not in ATTACHMENT_TYPES:
        raise invalid_attribute(f"Invalid attachment type {kind}: must be one of {_one_of(ATTACHMENT_TYPES)}",
                                param="attachments")
    if content_type not in ATTACHMENT_CONTENT_TYPES:
        raise invalid_attribute(f"Invalid attachment content type {content_type}: must be one of "
                                f"{_one_of(ATTACHMENT_CONTENT_TYPES)}", param="attachments")


def query_input(request: QueryRequest) -> str | list[JsonObject]:
    """The Responses `input`: the query with its text attachments appended, as LCORE
    sends it; with images, one user message whose image parts are data URLs."""
    text = request.query
    images = []
    for attachment in request.attachments or ():
        if attachment.content_type.startswith("image/"):
            images.append({"type": "input_image", "detail": "auto",
                           "image_url": f"data:{attachment.content_type};base64,{attachment.content}"})
        else:
            text += f"\n\n[Attachment: {attachment.attachment_type}]\n{attachment.content}"
    if not images:
        return text
    return [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}, *images]}]


def recorded_parts(question: str, request: QueryRequest) -> tuple[str, tuple[dict[str, Any], ...]]:
    """What a stored query's transcript keeps, from the question as the turn recorded it
    (`question`: the input's text after the redaction shields): LCORE's `redacted_query`
    (the query alone) and its `attachments`, the text ones with their redacted content.
    The text attachments were appended in order, so they are cut off from the end; one
    whose marker is no longer found keeps its content as sent."""
    attachments = [attachment.model_dump() for attachment in request.attachments or ()]
    for attachment in reversed(attachments):
        if attachment["content_type"].startswith("image/"):
            continue
        marker = f"\n\n[Attachment: {attachment['attachment_type']}]\n"
        at = question.rfind(marker)
        if at >= 0:
            question, attachment["content"] = question[:at], question[at + len(marker):]
    return question, tuple(attachments)


def responses_request(request: QueryRequest, stream: bool, configured_mcp: Mapping[str, str]) -> JsonObject:
    """The Responses request a legacy query is prepared as (see the module docstring).
    `configured_mcp`: the operator's MCP servers (label → URL), sent beside an explicit
    `file_search` as `tools` omitted would have sent them."""
    raw: dict[str, Any] = {"input": query_input(request), "stream": stream, "store": True,
                           "generate_topic_summary": request.generate_topic_summary}
    if request.conversation_id:
        raw["conversation"] = request.conversation_id
    if request.model and request.provider:
        raw["model"] = f"{request.provider}/{request.model}"
    if request.system_prompt is not None:
        raw["instructions"] = request.system_prompt
    if request.no_tools:
        raw["tool_choice"] = "none"
    else:
        # LCORE's referenced documents and rag chunks are the file_search results.
        raw["include"] = ["file_search_call.results"]
        if request.vector_store_ids is not None:
            tools: list[dict[str, Any]] = []
            if request.vector_store_ids:
                tools.append({"type": "file_search", "vector_store_ids": list(request.vector_store_ids)})
            tools += [{"type": "mcp", "server_label": label, "server_url": url}
                      for label, url in configured_mcp.items()]
            raw["tools"] = tools
    if request.shield_ids is not None:
        raw["shield_ids"] = request.shield_ids
    if request.solr is not None:
        raw["solr"] = request.solr.model_dump(exclude_none=True) if request.solr.mode else request.solr.filters
    return raw


def overrides_model(request: QueryRequest) -> bool:
    """LCORE's rule on these endpoints: naming any provider or model is an override, even
    the default one (rbac.feature)."""
    return bool(request.provider or request.model)

