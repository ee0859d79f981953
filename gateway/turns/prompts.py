"""The system prompt a turn sends (LCORE's `get_system_prompt`): the request's own
(`instructions`; the legacy endpoints' `system_prompt` arrives as it), unless the
operator disabled that (`customization.disable_query_system_prompt`: a 422), else the
configured one (`customization.system_prompt` or `system_prompt_path`), else LCORE's
default. No tool-usage hint is added (LCORE main has none). A response shows the
operator's prompt as LCORE's placeholder (`streaming/enrich.py`)."""

from __future__ import annotations

from gateway.config import CustomizationConfig
from gateway.schema.errors import ApiError
from gateway.schema.responses_request import ResponsesRequest


def prompt_disabled(field: str) -> ApiError:
    """LCORE's 422 for a request's own system prompt where the operator disabled them;
    `field` is what the request called it (`instructions`, or `system_prompt`)."""
    return ApiError(422, "System prompt customization is disabled",
                    "This instance does not support customizing the system prompt in the query request "
                    f"(disable_query_system_prompt is set). Please remove the {field} field from your request.",
                    code="system_prompt_disabled", param=field)


class SystemPrompts:
    def __init__(self, customization: CustomizationConfig):
        self._disabled = customization.disable_query_system_prompt
        self._default = customization.default_system_prompt

    def check(self, request: ResponsesRequest, field: str = "instructions") -> None:
        """LCORE's 422 for a request's own system prompt where the operator disabled them."""
        if request.instructions and self._disabled:
            raise prompt_disabled(field)

    def apply(self, request: ResponsesRequest, field: str = "instructions") -> bool:
        """Refuse a request's own system prompt where they are disabled, else give the
        request the one it runs with (its own when it has one: an empty one is none,
        as in LCORE). True: the operator's prompt was applied."""
        self.check(request, field)
        if request.instructions:
            return False
        # An operator's empty prompt (`system_prompt: ""`) sends none at all.
        request.instructions = self._default or None
        return bool(self._default)
