"""The tools and tool choice of a create-response request, mirroring Llama Stack
0.7.3's request types under the same class and validator names, as
`responses_types.py` does for the rest (the names appear in LCORE's 422 bodies).

Where the gateway accepts more than Llama Stack, or less (a configured MCP server's URL
cannot be overridden), it says so on the field.
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator, model_validator

# Validation context key: `{server_label: url}` of the MCP servers the operator configured.
CONFIGURED_MCP_SERVERS = "configured_mcp_servers"

# ---------------------------------------------------------------- tools


class SearchRankingOptions(BaseModel):
    ranker: str | None = None
    score_threshold: float | None = 0.0
    alpha: float | None = Field(default=None, ge=0.0, le=1.0)
    impact_factor: float | None = Field(default=None, gt=0.0)
    weights: dict[str, float] | None = None
    model: str | None = None

    @field_validator("weights")
    @classmethod
    def validate_weights(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is None:
            return value
        allowed = {"vector", "keyword", "neural"}
        if not all(key in allowed for key in value):
            raise ValueError(f"weights keys must be from {allowed}")
        if abs(sum(value.values()) - 1.0) > 0.001:
            raise ValueError("weights must sum to 1.0")
        return value


WEB_SEARCH_TYPES = ("web_search", "web_search_preview", "web_search_preview_2025_03_11", "web_search_2025_08_26")


class OpenAIResponseInputToolWebSearch(BaseModel):
    type: (Literal["web_search"] | Literal["web_search_preview"] | Literal["web_search_preview_2025_03_11"]
           | Literal["web_search_2025_08_26"]) = "web_search"
    search_context_size: str | None = Field(default="medium", pattern="^low|medium|high$")


class OpenAIResponseInputToolFunction(BaseModel):
    type: Literal["function"] = "function"
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None
    strict: bool | None = None


class OpenAIResponseInputToolFileSearch(BaseModel):
    type: Literal["file_search"] = "file_search"
    vector_store_ids: list[str]
    filters: dict[str, Any] | None = None
    max_num_results: int | None = Field(default=10, ge=1, le=50)
    ranking_options: SearchRankingOptions | None = None


class ApprovalFilter(BaseModel):
    always: list[str] | None = None
    never: list[str] | None = None


class AllowedToolsFilter(BaseModel):
    tool_names: list[str] | None = None


class InputToolMCP(BaseModel):
    type: Literal["mcp"] = "mcp"
    server_label: str
    connector_id: str | None = None
    server_url: str | None = None
    headers: dict[str, Any] | None = None
    authorization: str | None = None
    require_approval: Literal["always"] | Literal["never"] | ApprovalFilter = "never"
    allowed_tools: list[str] | AllowedToolsFilter | None = None

    @model_validator(mode="after")
    def validate_server_or_connector(self, info: ValidationInfo) -> "InputToolMCP":
        # Ours: a server the operator configured (named in the validation context) is
        # completed by the gateway, and its URL is the operator's alone.
        configured = (info.context or {}).get(CONFIGURED_MCP_SERVERS, {})
        if self.server_label in configured:
            if self.server_url and self.server_url != configured[self.server_label]:
                raise ValueError(f"server_url cannot be set for MCP server '{self.server_label}': "
                                 "its URL is configured by the operator")
            return self
        if not self.server_url and not self.connector_id:
            raise ValueError("Either 'server_url' or 'connector_id' must be provided for MCP tool")
        return self


InputTool = Annotated[
    OpenAIResponseInputToolWebSearch | OpenAIResponseInputToolFileSearch | OpenAIResponseInputToolFunction
    | InputToolMCP,
    Field(discriminator="type"),
]

# ---------------------------------------------------------------- tool choice


class OpenAIResponseInputToolChoiceAllowedTools(BaseModel):
    mode: Literal["auto", "required"] = "auto"
    tools: list[dict[str, str]]
    type: Literal["allowed_tools"] = "allowed_tools"


class OpenAIResponseInputToolChoiceFileSearch(BaseModel):
    type: Literal["file_search"] = "file_search"


class OpenAIResponseInputToolChoiceWebSearch(BaseModel):
    type: (Literal["web_search"] | Literal["web_search_preview"] | Literal["web_search_preview_2025_03_11"]
           | Literal["web_search_2025_08_26"]) = "web_search"


class OpenAIResponseInputToolChoiceFunctionTool(BaseModel):
    name: str
    type: Literal["function"] = "function"


class OpenAIResponseInputToolChoiceMCPTool(BaseModel):
    server_label: str
    type: Literal["mcp"] = "mcp"
    name: str | None = None


class OpenAIResponseInputToolChoiceCustomTool(BaseModel):
    type: Literal["custom"] = "custom"
    name: str


class OpenAIResponseInputToolChoiceMode(str, Enum):
    auto = "auto"
    required = "required"
    none = "none"


OpenAIResponseInputToolChoiceObject = Annotated[
    OpenAIResponseInputToolChoiceAllowedTools | OpenAIResponseInputToolChoiceFileSearch
    | OpenAIResponseInputToolChoiceWebSearch | OpenAIResponseInputToolChoiceFunctionTool
    | OpenAIResponseInputToolChoiceMCPTool | OpenAIResponseInputToolChoiceCustomTool,
    Field(discriminator="type"),
]
ToolChoice = OpenAIResponseInputToolChoiceMode | OpenAIResponseInputToolChoiceObject
