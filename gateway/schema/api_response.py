"""The response object as the gateway answers it: OpenAI's with spec 001's additions.

Apart from `api.py` because it loads the `openai` package's types (~20 MiB of RSS),
which only `/openapi.json` needs: `http/openapi.py` imports this module when it first
builds the document, not at start-up (tests/test_startup_imports.py)."""

from __future__ import annotations

import warnings

from openai.types.responses import Response, ResponsePrompt, ResponseTextConfig, Tool
from openai.types.responses.response import ToolChoice as SdkToolChoice
from openai.types.shared import Reasoning
from pydantic import Field

from gateway.schema.responses_tools import InputTool, ToolChoice
from gateway.schema.responses_types import OpenAIResponsePrompt, OpenAIResponseReasoning, OpenAIResponseText

with warnings.catch_warnings():
    # The SDK computes `output_text` as a property; the gateway sends it as a field.
    warnings.filterwarnings("ignore", message='Field name "output_text"')

    class GatewayResponse(Response):
        """OpenAI's response object with LCORE's additions (spec 001)."""

        # LCORE's plain id where OpenAI's SDK has an object: pydantic re-declares the field, mypy sees an override.
        conversation: str | None = Field(  # type: ignore[assignment]
            None, description="`conv_<48 hex>`: the conversation the turn belongs to; null for a `store: false` "
                              "turn in none")
        available_quotas: dict[str, int] = Field(default_factory=dict,
                                                 description="Tokens left per quota limiter after this turn")
        output_text: str = Field("", description="The concatenated text of the assistant's messages")
        # The turn's tools are echoed as the request declared them, and a request takes
        # Llama Stack's wider values where OpenAI's SDK has a literal (a file search's
        # `ranking_options.ranker`: any ranker name): found by schemathesis. Same re-declaration as above.
        tools: list[Tool | InputTool] = Field(  # type: ignore[assignment]
            description="The turn's tools: OpenAI's types, or the request's tool shapes")
        # Likewise `tool_choice`: as the request declared it (`allowed_tools` without its
        # defaulted `mode`): found by schemathesis.
        tool_choice: SdkToolChoice | ToolChoice = Field(  # type: ignore[assignment]
            description="OpenAI's types, or the request's tool_choice shapes")
        # And the other settings echoed as the request declared them (`text.format` with
        # its optional members null).
        text: ResponseTextConfig | OpenAIResponseText | None = None  # type: ignore[assignment]
        reasoning: Reasoning | OpenAIResponseReasoning | None = None  # type: ignore[assignment]
        prompt: ResponsePrompt | OpenAIResponsePrompt | None = None  # type: ignore[assignment]
