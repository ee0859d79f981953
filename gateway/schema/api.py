"""Wire models of the gateway's own bodies: what `/v1/info`, `/v1/models`, the probes and
the error envelope return (the response object with spec 001's additions is in
`api_response.py`). They describe the API in `/openapi.json`; the handlers build the
same shapes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class ResponseDeleted(BaseModel):
    id: str
    object: Literal["response"] = "response"
    deleted: bool


class InputItemList(BaseModel):
    object: Literal["list"] = "list"
    # Items as the upstream keeps them: Llama Stack's input messages may have a null
    # `id` and `status` and string `content`, which OpenAI's item types do not allow.
    data: list[dict[str, Any]] = Field(description="Conversation items (`ResponseItem`-shaped)")
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool = False


class LcoreModel(BaseModel):
    identifier: str
    metadata: dict[str, Any]
    api_model_type: str
    provider_id: str | None
    type: Literal["model"] = "model"
    provider_resource_id: str
    model_type: str


class OpenAIModel(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str


class ModelsResponse(BaseModel):
    """LCORE reads `models`, OpenAI SDKs read `object` and `data`."""

    object: Literal["list"] = "list"
    data: list[OpenAIModel]
    models: list[LcoreModel]


class InfoResponse(BaseModel):
    name: str
    service_version: str
    llama_stack_version: str | None


class LivenessResponse(BaseModel):
    alive: bool


class ReadinessResponse(BaseModel):
    ready: bool
    reason: str
    overall_status: Literal["healthy", "degraded", "unhealthy"]
    impacts: list[str] | None
    providers: list[dict[str, Any]]


class AuthorizedResponse(BaseModel):
    """`POST /authorized` (LCORE's body; the token is never in it)."""

    user_id: str
    username: str
    skip_userid_check: bool


class ErrorDetail(BaseModel):
    response: str = Field(description="A short summary")
    cause: str = Field(description="What exactly went wrong")


class ValidationErrorItem(BaseModel):
    """One entry of FastAPI's request-validation list (LCORE's 422 body)."""

    type: str
    loc: list[str | int]
    msg: str
    input: Any
    ctx: dict[str, Any] | None = None


class OpenAIErrorObject(BaseModel):
    message: str
    type: str
    code: str | None
    param: str | None


class ErrorBody(BaseModel):
    """LCORE's `detail` as LCORE gives it for the case; OpenAI's `error` on the endpoints
    OpenAI SDKs call (unless `service.error_body: lcore`)."""

    detail: ErrorDetail | list[ValidationErrorItem] | str
    error: OpenAIErrorObject | None = None
