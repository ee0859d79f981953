"""LCORE's conversation request and response models (`/v1` and `/v2/conversations`):
the request bodies the handlers validate, FastAPI-style, and the bodies they answer
with, described in `/openapi.json` (the bodies themselves are assembled in
`gateway/legacy/conversations.py`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

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


# OpenAI's Conversations API on the same paths (issue 23). Its limits are OpenAI's: at
# most 20 items per request, at most 16 metadata pairs, keys ≤ 64 and values ≤ 512
# characters. Items are objects the turn sends as input (validated by whoever runs it).

MAX_ITEMS = 20
MAX_METADATA = 16
Metadata = dict[Annotated[str, Field(max_length=64)], Annotated[str, Field(max_length=512)]]


class OpenAIConversationCreate(BaseModel):
    """`POST /v1/conversations`."""

    model_config = ConfigDict(extra="forbid")
    items: list[dict[str, Any]] | None = Field(None, max_length=MAX_ITEMS)
    metadata: Metadata | None = Field(None, max_length=MAX_METADATA)


class OpenAIConversationUpdate(BaseModel):
    """`POST /v1/conversations/{id}`: the metadata replaces the conversation's."""

    model_config = ConfigDict(extra="forbid")
    metadata: Metadata = Field(max_length=MAX_METADATA)


class OpenAIItemsCreate(BaseModel):
    """`POST /v1/conversations/{id}/items`."""

    model_config = ConfigDict(extra="forbid")
    items: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_ITEMS)


class OpenAIConversation(BaseModel):
    """OpenAI's `Conversation` (the `openai` package's `types/conversations`)."""

    id: str
    object: Literal["conversation"]
    created_at: int
    metadata: dict[str, str] | None = None


class OpenAIConversationItemList(BaseModel):
    object: Literal["list"]
    data: list[dict[str, Any]]
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool


class ConversationAndHistory(OpenAIConversation, ConversationResponse):
    """`GET /v1/conversations/{id}`: LCORE's and OpenAI's keys at once."""


class ConversationDeletedBoth(ConversationDeleteResponse):
    """`DELETE /v1/conversations/{id}`: LCORE's and OpenAI's keys at once."""

    id: str
    object: Literal["conversation.deleted"]
