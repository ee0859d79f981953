"""LCORE's feedback models (lcore.md 1.3): `POST /v1/feedback`'s body, the status
switch's, and their answers; validation messages are LCORE's (FastAPI's 422 list)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gateway.schema.ids import normalize_conversation_id


class FeedbackCategory(StrEnum):
    INCORRECT = "incorrect"
    NOT_RELEVANT = "not_relevant"
    INCOMPLETE = "incomplete"
    OUTDATED_INFORMATION = "outdated_information"
    UNSAFE = "unsafe"
    OTHER = "other"


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    user_question: str
    llm_response: str
    sentiment: int | None = None
    user_feedback: str | None = Field(None, max_length=4096)
    categories: list[FeedbackCategory] | None = None

    @field_validator("conversation_id")
    @classmethod
    def _suid(cls, value: str) -> str:
        if normalize_conversation_id(value) is None:
            raise ValueError(f"Improper conversation ID {value}")
        return value

    @field_validator("sentiment")
    @classmethod
    def _sentiment(cls, value: int | None) -> int | None:
        if value not in (-1, 1, None):
            raise ValueError(f"Improper sentiment value of {value}, needs to be -1 or 1")
        return value

    @field_validator("categories")
    @classmethod
    def _categories(cls, value: list[FeedbackCategory] | None) -> list[FeedbackCategory] | None:
        return list(dict.fromkeys(value)) if value else None   # deduplicated in order; empty is none

    @model_validator(mode="after")
    def _some_feedback(self) -> "FeedbackRequest":
        if self.sentiment is None and not self.user_feedback and self.categories is None:
            raise ValueError("At least one form of feedback must be provided: 'sentiment', 'user_feedback', "
                             "or 'categories'")
        return self


class FeedbackStatusUpdateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    status: bool = False


class FeedbackResponse(BaseModel):
    response: str = "feedback received"


class FeedbackStatus(BaseModel):
    functionality: str = "feedback"
    status: dict[str, Any]


class FeedbackStatusUpdate(BaseModel):
    status: dict[str, Any]   # previous_status, updated_status, updated_by, timestamp
