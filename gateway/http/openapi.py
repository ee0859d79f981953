"""`GET /openapi.json`: an OpenAPI 3.1 document of every endpoint (`operations.py`'s
`OPERATIONS`), generated from the pydantic models the gateway validates and answers with.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from gateway.schema.conversations import (ConversationAndHistory, ConversationDeletedBoth,
                                          ConversationDeleteResponse, ConversationResponse,
                                          ConversationsListResponse, ConversationsListResponseV2,
                                          ConversationUpdateRequest, ConversationUpdateResponse, OpenAIConversation,
                                          OpenAIConversationCreate, OpenAIConversationItemList,
                                          OpenAIConversationUpdate, OpenAIItemsCreate)
from gateway.schema.feedback import (FeedbackRequest, FeedbackResponse, FeedbackStatus, FeedbackStatusUpdate,
                                     FeedbackStatusUpdateRequest)
from gateway.schema.api import (AuthorizedResponse, ErrorBody, InfoResponse, InputItemList, LivenessResponse,
                                ModelsResponse, ReadinessResponse, ResponseDeleted)
from gateway.schema.quota_api import QuotaChange, QuotasResponse, UsageReport
from gateway.schema.responses_request import ResponsesRequest

from gateway.http.operations import (COMPACT_REQUEST, COMPACTED, INFER_REQUEST, OPERATIONS, QUERY_REQUEST,
                                     STREAM_EVENT, GatewayResponse, Operation)

_REF = "#/components/schemas/{model}"
_ERRORS = {400: "Bad request", 401: "Missing or invalid credentials", 403: "Not allowed",
           404: "Not found", 409: "Conflict", 413: "Request or prompt too large",
           422: "Request validation failed (FastAPI's list in `detail`)", 429: "Quota exceeded",
           500: "Internal server error", 501: "Not available in this mode", 503: "The upstream is unreachable"}


def openapi_document(title: str, version: str, root_path: str) -> dict[str, Any]:
    schemas = _schemas()
    paths: dict[str, dict[str, Any]] = {}
    for operation in OPERATIONS:
        paths.setdefault(operation.path, {})[operation.method] = _operation(operation, schemas)
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version,
                 "description": "An OpenAI-compatible gateway in front of Llama Stack, with LCORE's extensions."},
        "servers": [{"url": root_path or "/"}],
        "paths": paths,
        "components": {"schemas": schemas["$defs"],
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }


def _schemas() -> dict[str, Any]:
    models = {GatewayResponse.load(), ResponseDeleted, InputItemList, ModelsResponse, InfoResponse,
              LivenessResponse, ReadinessResponse, AuthorizedResponse, ErrorBody, QuotasResponse, UsageReport,
              ConversationsListResponse, ConversationsListResponseV2, ConversationResponse,
              ConversationUpdateResponse, ConversationDeleteResponse, FeedbackResponse, FeedbackStatus,
              FeedbackStatusUpdate, OpenAIConversation, OpenAIConversationItemList, ConversationAndHistory,
              ConversationDeletedBoth}
    inputs: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = [
        (model.__name__, "serialization", TypeAdapter(model)) for model in models]
    inputs.append(("ResponsesRequest", "validation", TypeAdapter(ResponsesRequest)))
    inputs.append(("QuotaChange", "validation", TypeAdapter(QuotaChange)))
    inputs.append(("ConversationUpdateRequest", "validation", TypeAdapter(ConversationUpdateRequest)))
    inputs.append(("FeedbackRequest", "validation", TypeAdapter(FeedbackRequest)))
    for request in (OpenAIConversationCreate, OpenAIConversationUpdate, OpenAIItemsCreate):
        inputs.append((request.__name__, "validation", TypeAdapter(request)))
    inputs.append(("FeedbackStatusUpdateRequest", "validation", TypeAdapter(FeedbackStatusUpdateRequest)))
    inputs.append(("QueryRequest", "validation", TypeAdapter(QUERY_REQUEST.load())))
    inputs.append(("InferRequest", "validation", TypeAdapter(INFER_REQUEST.load())))
    inputs.append(("CompactRequest", "validation", TypeAdapter(COMPACT_REQUEST.load())))
    inputs.append(("CompactedWindow", "serialization", TypeAdapter(COMPACTED.load())))
    inputs.append(("ResponseStreamEvent", "serialization", TypeAdapter(STREAM_EVENT.load())))
    refs, definitions = TypeAdapter.json_schemas(inputs, ref_template=_REF)
    definitions["$defs"]["ResponseStreamEvent"] = refs[("ResponseStreamEvent", "serialization")]
    # The lifecycle events (`response.created`, `.completed`, ...) carry the gateway's
    # response object, not the SDK's: LCORE's plain conversation id where the SDK has an
    # object (found by schemathesis: tests/e2e/test_schemathesis.py).
    sdk_response, ours = _REF.format(model="Response"), _REF.format(model=GatewayResponse.__name__)
    for definition in definitions["$defs"].values():
        carried = definition.get("properties", {}).get("response")
        if isinstance(carried, dict) and carried.get("$ref") == sdk_response:
            definition["properties"]["response"] = {"$ref": ours}
    return {"$defs": definitions["$defs"], "refs": {key[0]: value for key, value in refs.items()}}


def _operation(operation: Operation, schemas: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"summary": operation.summary, "tags": [operation.tag],
                            "operationId": operation.operation_id, "x-lcore-action": str(operation.action),
                            "responses": {"200": _ok(operation, schemas)}}
    spec["security"] = [] if operation.public else [{"bearer": []}, {}]
    parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                  for name in operation.path_params]
    parameters += [{"name": name, "in": "query", "required": False, "description": text,
                    "schema": {"type": "string"}} for name, text in operation.query]
    if parameters:
        spec["parameters"] = parameters
    if operation.request is not None:
        spec["requestBody"] = {"required": True, "content": {"application/json": {
            "schema": schemas["refs"][operation.request.__name__]}}}
    for status in operation.errors:
        spec["responses"][str(status)] = {"description": _ERRORS[status], "content": {"application/json": {
            "schema": schemas["refs"]["ErrorBody"]}}}
    return spec


def _ok(operation: Operation, schemas: dict[str, Any]) -> dict[str, Any]:
    if operation.html:
        return {"description": "OK", "content": {"text/html": {"schema": {"type": "string"}}}}
    if operation.text:
        return {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}
    if operation.lcore_stream:
        frame = {"type": "object", "required": ["event", "data"],
                 "properties": {"event": {"type": "string"}, "data": {"type": "object"}}}
        return {"description": "Server-sent events, each `data: {\"event\": <name>, \"data\": {...}}` "
                               "(`start`, `token`, ..., `end`, or `error`); with `media_type: text/plain`, "
                               "the answer's text",
                "content": {"text/event-stream": {"schema": _sse(frame)},
                            "text/plain": {"schema": {"type": "string"}}}}
    if operation.ok is None:
        return {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}
    content = {"application/json": {"schema": schemas["refs"][operation.ok.__name__]}}
    if not operation.stream:
        return {"description": "OK", "content": content}
    content["text/event-stream"] = {"schema": _sse({"$ref": "#/components/schemas/ResponseStreamEvent"},
                                                   terminator="[DONE]")}
    return {"description": "The response object; with `stream: true`, server-sent events instead: "
                           "`event: <type>` and `data: <event JSON>` frames numbered from 0, then `data: [DONE]`",
            "content": content}


def _sse(data: dict[str, Any], terminator: str | None = None) -> dict[str, Any]:
    """The schema of one server-sent event (as OpenAPI 3.2's `itemSchema` and schemathesis
    read a `text/event-stream` schema): its `data` line is JSON of the schema `data`, or
    the stream's `terminator`."""
    json_data: dict[str, Any] = {"type": "string", "contentMediaType": "application/json", "contentSchema": data}
    return {"type": "object", "required": ["data"],
            "properties": {"event": {"type": "string"}, "data": json_data if terminator is None else
                           {"anyOf": [{"const": terminator}, json_data]}}}
