"""gateway.sdk: a client-side agent over the Responses API (spec 004).

The agent keeps the conversation's state and runs the agentic loop on the client: it
sends the request, runs the function calls the model asks for (Python functions whose
JSON schemas come from their signatures), sends their outputs back, and repeats until a
final answer. It works against the gateway in both upstream modes and against any
OpenAI-compatible Responses API, with `openai.OpenAI` or `openai.AsyncOpenAI`.

Importing this package imports none of the gateway's server modules (it depends on
`openai`, `pydantic` and `docstring_parser` only). See docs/sdk.md.
"""

from .agent import Agent
from .errors import (AgentError, AgentStateError, MissingToolError, ResponseFailedError,
                     SnapshotError, ToolDefinitionError)
from .results import (ApprovalRequest, ApprovalRequestEvent, Event, ResultEvent, RunResult,
                      TextDeltaEvent, ToolCallEvent, ToolResultEvent, Usage)
from .tools import FunctionTool, tool

__all__ = [
    "Agent", "AgentError", "AgentStateError", "ApprovalRequest", "ApprovalRequestEvent", "Event",
    "FunctionTool", "MissingToolError", "ResponseFailedError", "ResultEvent", "RunResult",
    "SnapshotError", "TextDeltaEvent", "ToolCallEvent", "ToolDefinitionError", "ToolResultEvent",
    "Usage", "tool",
]
