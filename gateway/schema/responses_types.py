"""The typed parts of a create-response request: input items, content parts, text
format, prompt and reasoning (tools and tool choice: `responses_tools.py`).

These mirror the request types of Llama Stack 0.7.3, which LCORE's `/v1/responses`
validates with, field for field and under the same class and validator names. The
names matter: pydantic puts them in the `loc` of validation errors (`["body", "input",
"list[union[OpenAIResponseMessage,...]]", 0, "OpenAIResponseMessage", "content",
"list[tagged-union[...,function-after[validate_file_source(), ...]]]"]`), and LCORE
clients compare those bodies. Validation is lax (pydantic's default), as LCORE's is.

Where the gateway accepts more than Llama Stack, it says so on the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator
from typing_extensions import TypedDict

# ---------------------------------------------------------------- content parts


class OpenAIResponseInputMessageContentText(BaseModel):
    text: str
    type: Literal["input_text"] = "input_text"


class OpenAIResponseInputMessageContentImage(BaseModel):
    detail: Literal["low"] | Literal["high"] | Literal["auto"] = "auto"
    type: Literal["input_image"] = "input_image"
    file_id: str | None = None
    image_url: str | None = None


class OpenAIResponseInputMessageContentFile(BaseModel):
    type: Literal["input_file"] = "input_file"
    file_data: str | None = None
    file_id: str | None = None
    file_url: str | None = None
    filename: str | None = None

    @model_validator(mode="after")
    def validate_file_source(self) -> "OpenAIResponseInputMessageContentFile":
        if not any([self.file_data, self.file_id, self.file_url, self.filename]):
            raise ValueError("At least one of 'file_data', 'file_id', 'file_url', or 'filename' must be "
                             "provided for file content")
        return self


OpenAIResponseInputMessageContent = Annotated[
    OpenAIResponseInputMessageContentText | OpenAIResponseInputMessageContentImage
    | OpenAIResponseInputMessageContentFile,
    Field(discriminator="type"),
]


class OpenAITopLogProb(BaseModel):
    token: str
    bytes: list[int] | None = None
    logprob: float


class OpenAITokenLogProb(BaseModel):
    token: str
    bytes: list[int] | None = None
    logprob: float
    top_logprobs: list[OpenAITopLogProb] | None = None


class OpenAIResponseAnnotationFileCitation(BaseModel):
    type: Literal["file_citation"] = "file_citation"
    file_id: str
    filename: str
    index: int


class OpenAIResponseAnnotationCitation(BaseModel):
    type: Literal["url_citation"] = "url_citation"
    end_index: int
    start_index: int
    title: str
    url: str


class OpenAIResponseAnnotationContainerFileCitation(BaseModel):
    type: Literal["container_file_citation"] = "container_file_citation"
    container_id: str
    end_index: int
    file_id: str
    filename: str
    start_index: int


class OpenAIResponseAnnotationFilePath(BaseModel):
    type: Literal["file_path"] = "file_path"
    file_id: str
    index: int


OpenAIResponseAnnotations = Annotated[
    OpenAIResponseAnnotationFileCitation | OpenAIResponseAnnotationCitation
    | OpenAIResponseAnnotationContainerFileCitation | OpenAIResponseAnnotationFilePath,
    Field(discriminator="type"),
]


class OpenAIResponseOutputMessageContentOutputText(BaseModel):
    text: str
    type: Literal["output_text"] = "output_text"
    annotations: list[OpenAIResponseAnnotations] = Field(default_factory=list)
    logprobs: list[OpenAITokenLogProb] | None = None


class OpenAIResponseContentPartRefusal(BaseModel):
    type: Literal["refusal"] = "refusal"
    refusal: str


OpenAIResponseOutputMessageContent = Annotated[
    OpenAIResponseOutputMessageContentOutputText | OpenAIResponseContentPartRefusal,
    Field(discriminator="type"),
]

# ---------------------------------------------------------------- input items


class OpenAIResponseMessage(BaseModel):
    content: str | Sequence[OpenAIResponseInputMessageContent] | Sequence[OpenAIResponseOutputMessageContent]
    role: Literal["system"] | Literal["developer"] | Literal["user"] | Literal["assistant"]
    type: Literal["message"] = "message"
    id: str | None = None
    status: str | None = None


class OpenAIResponseOutputMessageWebSearchToolCall(BaseModel):
    id: str
    status: str
    type: Literal["web_search_call"] = "web_search_call"


class OpenAIResponseOutputMessageFileSearchToolCallResults(BaseModel):
    attributes: dict[str, Any]
    file_id: str
    filename: str
    score: float
    text: str


class OpenAIResponseOutputMessageFileSearchToolCall(BaseModel):
    id: str
    queries: Sequence[str]
    status: str
    type: Literal["file_search_call"] = "file_search_call"
    results: Sequence[OpenAIResponseOutputMessageFileSearchToolCallResults] | None = None


class OpenAIResponseInputFunctionToolCallOutput(BaseModel):
    call_id: str
    output: str | list[OpenAIResponseInputMessageContent]
    type: Literal["function_call_output"] = "function_call_output"
    id: str | None = None
    status: str | None = None


class OpenAIResponseOutputMessageMCPCall(BaseModel):
    id: str
    type: Literal["mcp_call"] = "mcp_call"
    arguments: str
    name: str
    server_label: str
    # Ours: also the object form the `openai` types give `error` (the gateway repairs
    # Llama Stack's string into it, and clients send outputs back as input).
    error: str | dict[str, Any] | None = None
    output: str | None = None


class MCPListToolsTool(BaseModel):
    input_schema: dict[str, Any]
    name: str
    description: str | None = None


class OpenAIResponseOutputMessageMCPListTools(BaseModel):
    id: str
    type: Literal["mcp_list_tools"] = "mcp_list_tools"
    server_label: str
    tools: list[MCPListToolsTool]


class OpenAIResponseMCPApprovalRequest(BaseModel):
    arguments: str
    id: str
    name: str
    server_label: str
    type: Literal["mcp_approval_request"] = "mcp_approval_request"


class OpenAIResponseOutputMessageFunctionToolCall(BaseModel):
    call_id: str
    name: str
    arguments: str
    type: Literal["function_call"] = "function_call"
    id: str | None = None
    status: str | None = None


class OpenAIResponseMCPApprovalResponse(BaseModel):
    approval_request_id: str
    approve: bool
    type: Literal["mcp_approval_response"] = "mcp_approval_response"
    id: str | None = None
    reason: str | None = None


class OpenAIResponseOutputMessageReasoningSummary(BaseModel):
    text: str
    type: Literal["summary_text"] = "summary_text"


class OpenAIResponseOutputMessageReasoningContent(BaseModel):
    text: str
    type: Literal["reasoning_text"] = "reasoning_text"


class OpenAIResponseOutputMessageReasoningItem(BaseModel):
    id: str
    summary: list[OpenAIResponseOutputMessageReasoningSummary]
    type: Literal["reasoning"] = "reasoning"
    content: list[OpenAIResponseOutputMessageReasoningContent] | None = None
    status: Literal["in_progress", "completed", "incomplete"] | None = None


# Not a discriminated union (as in LCORE): every member is tried, and the errors of
# each are reported.
ResponseItem = (
    OpenAIResponseMessage | OpenAIResponseOutputMessageWebSearchToolCall
    | OpenAIResponseOutputMessageFileSearchToolCall | OpenAIResponseInputFunctionToolCallOutput
    | OpenAIResponseOutputMessageMCPCall | OpenAIResponseOutputMessageMCPListTools
    | OpenAIResponseMCPApprovalRequest | OpenAIResponseOutputMessageFunctionToolCall
    | OpenAIResponseMCPApprovalResponse | OpenAIResponseOutputMessageReasoningItem
)
ResponseInput = str | list[ResponseItem]

# ---------------------------------------------------------------- text, prompt, reasoning


class OpenAIResponseTextFormat(TypedDict, total=False):
    type: Literal["text"] | Literal["json_schema"] | Literal["json_object"]
    name: str | None
    schema: dict[str, Any] | None
    description: str | None
    strict: bool | None


class OpenAIResponseText(BaseModel):
    format: OpenAIResponseTextFormat | None = None


class OpenAIResponsePrompt(BaseModel):
    id: str
    variables: dict[str, OpenAIResponseInputMessageContent] | None = None
    version: str | None = None


class OpenAIResponseReasoning(BaseModel):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
