"""The SDK's own exceptions.

Mistakes a caller can fix (a bad tool, a bad snapshot, a tool missing for a restored
run, a call made in the wrong state) are `ValueError`s, so code that already guards
against bad arguments catches them; a model call that fails is not the caller's
mistake and is a `RuntimeError`.
"""

from __future__ import annotations

from typing import Any


class AgentError(ValueError):
    """Base class of the errors the SDK raises for what its caller gave it."""


class ToolDefinitionError(AgentError):
    """A tool cannot be offered to a model: no type hint, *args, a duplicate name, an
    unknown server-side tool type, a schema strict mode cannot express..."""


class SnapshotError(AgentError):
    """A snapshot is not one this SDK wrote: malformed JSON, an unknown version, a
    field of the wrong type or size."""


class MissingToolError(AgentError):
    """A restored agent's pending function calls name a tool it was not given."""


class AgentStateError(AgentError):
    """A call that the agent's state does not allow now: `run` while a run waits for
    approvals, `resume` with approvals that do not match, two runs at once."""


class ResponseFailedError(RuntimeError):
    """The server ended a response `failed` (or a stream with an error event)."""

    def __init__(self, message: str, response: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.response = response
