"""LCORE's conversation request and response models (`/v1` and `/v2/conversations`):
the request bodies the handlers validate, FastAPI-style, and the bodies they answer
with, described in `/openapi.json` (the bodies themselves are assembled in
`gateway/legacy/conversations.py`)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ConversationUpdateRequest(BaseModel):
    """`PUT /v{1,2}/conversations/{id}` (LCORE's, `extra="forbid"`)."""

    model_config = ConfigDict(extra="forbid")
    topic_summary: str = Field(min_length=1, max_length=1000)


class ConversationDetails(BaseModel):
    conversation_id: str
    created_at: str | None = None
    last_message_at: str | None = None
    message_count: int | None = None
    last_used_model: str | None = None
    last_used_provider: str | None = None
    topic_summary: str | None = None


class ConversationsListResponse(BaseModel):
    conversations: list[ConversationDetails]


class ConversationData(BaseModel):
    conversation_id: str
    topic_summary: str | None = None
    last_message_timestamp: float


class ConversationsListResponseV2(BaseModel):
    conversations: list[ConversationData]


class Message(BaseModel):
    content: str
    type: Literal["user", "assistant", "system", "developer"]
    referenced_documents: list[dict[str, Any]] | None = None


class ConversationTurn(BaseModel):
    messages: list[Message]
    tool_calls: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    provider: str | None = None
    model: str | None = None
    started_at: str
    completed_at: str


class ConversationResponse(BaseModel):
    conversation_id: str
    chat_history: list[ConversationTurn]


class ConversationDeleteResponse(BaseModel):
    conversation_id: str
    deleted: bool
    response: str
    success: bool = True


class ConversationUpdateResponse(BaseModel):
    conversation_id: str
    success: bool
    message: str
