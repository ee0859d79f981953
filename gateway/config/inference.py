"""The `inference` section: the default model and the bounds of a turn's tool loop."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from gateway.config.base import Strict, not_built


class InferenceConfig(Strict):
    default_provider: str | None = None
    default_model: str | None = None
    max_infer_iters: int = Field(10, ge=1)
    max_tool_calls: int = Field(30, ge=1)
    # Ours: the most a client may ask for (its `max_infer_iters` / `max_tool_calls` are
    # cut to these, in both modes; the two above stay the defaults when it sends none).
    # Finite, so one request cannot buy an unbounded loop against one admission.
    max_infer_iters_limit: int = Field(50, ge=1)
    max_tool_calls_limit: int = Field(200, ge=1)
    # Ours (engine mode only). How a response that ends with calls of the client's
    # function tools ends: `completed` (OpenAI's behaviour, every SDK understands it) or
    # `requires_action` with a `response.requires_action` terminal event (spec 002; not
    # in the `openai` package's types).
    client_tool_status: Literal["completed", "requires_action"] = "completed"
    context_windows: dict[str, int] | None = not_built()
    providers: list[dict[str, Any]] | None = not_built()

    @model_validator(mode="after")
    def _both_or_neither(self) -> "InferenceConfig":
        if bool(self.default_provider) != bool(self.default_model):
            raise ValueError("default_provider and default_model must be set together")
        return self

    @model_validator(mode="after")
    def _defaults_within_limits(self) -> "InferenceConfig":
        if self.max_infer_iters > self.max_infer_iters_limit or self.max_tool_calls > self.max_tool_calls_limit:
            raise ValueError("max_infer_iters / max_tool_calls must not exceed max_infer_iters_limit / "
                             "max_tool_calls_limit")
        return self

    @property
    def default_model_id(self) -> str | None:
        if not self.default_model:
            return None
        return f"{self.default_provider}/{self.default_model}"
