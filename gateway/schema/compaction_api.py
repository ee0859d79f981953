"""`POST /v1/responses/compact`'s answer as the gateway gives it: the spec's
`CompactResource`, whose output holds the window's user messages (`ItemField`), which
the `openai` package's `CompactedResponse` types as output items only. Loads the
`openai` types: imported by `http/openapi.py` when it builds the document and by the
tests, never at start-up."""

from __future__ import annotations

from typing import Literal, Union

from openai.types.responses.response_compaction_item import ResponseCompactionItem
from openai.types.responses.response_input_message_item import ResponseInputMessageItem
from openai.types.responses.response_usage import ResponseUsage
from pydantic import BaseModel, Field


class CompactedWindow(BaseModel):
    id: str = Field(description="The unique identifier of the compacted response")
    object: Literal["response.compaction"]
    created_at: int = Field(description="Unix time (seconds) of the compaction")
    output: list[Union[ResponseInputMessageItem, ResponseCompactionItem]] = Field(
        description="The window's user messages, then one `compaction` item (opaque: sealed for the caller)")
    usage: ResponseUsage
