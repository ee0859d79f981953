"""The system prompt a turn sends (LCORE's `get_system_prompt`): the request's own
(`instructions`; the legacy endpoints' `system_prompt` arrives as it), unless the
operator disabled that (`customization.disable_query_system_prompt`: a 422), else the
configured one (`customization.system_prompt` or `system_prompt_path`), else LCORE's
default. No tool-usage hint is added (LCORE main has none). A response shows the
operator's prompt as LCORE's placeholder (`streaming/enrich.py`).

Where request prompts are disabled, a client has no other way to instruct the model
either (issue 40): a `system` or `developer` message in a turn's input, or added to a
conversation through OpenAI's Conversations API, is the same 422 naming it; one a
conversation held from before the operator set the flag is refused when a turn takes
it (`stored_prompt_disabled`), and given back to the conversation."""

from __future__ import annotations

from typing import Any

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


# The roles of a message that instructs the model: a system prompt by another name.
SYSTEM_ROLES = ("system", "developer")


def system_message(items: Any) -> int | None:
    """The index of the first `system` or `developer` message of `items` (None: none)."""
    if not isinstance(items, list):
        return None
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("role") in SYSTEM_ROLES and item.get("type", "message") == "message":
            return index
    return None


def refuse_system_messages(items: Any, field: str) -> None:
    """LCORE's 422 naming `field[N]` for a `system` or `developer` message of `items`
    (call it only where request prompts are disabled)."""
    index = system_message(items)
    if index is not None:
        raise prompt_disabled(f"{field}[{index}]")


def stored_prompt_disabled(item_id: str, role: str) -> ApiError:
    """The 422 for a `system` or `developer` message a conversation held from before
    request prompts were disabled, when a turn would send it."""
    return ApiError(422, "System prompt customization is disabled",
                    "This instance does not support customizing the system prompt in the query request "
                    f"(disable_query_system_prompt is set). The conversation's item {item_id} is a {role} message: "
                    "delete it from the conversation.", code="system_prompt_disabled", param="conversation")


class SystemPrompts:
    def __init__(self, customization: CustomizationConfig):
        self._disabled = customization.disable_query_system_prompt
        self._default = customization.default_system_prompt

    def refuse_messages(self, items: Any, field: str = "input") -> None:
        """Where request prompts are disabled, a `system` or `developer` message of a
        request's `items` is LCORE's 422 naming it (`input[N]`)."""
        if self._disabled:
            refuse_system_messages(items, field)

    def stored_message(self, items: list[dict[str, Any]]) -> ApiError | None:
        """Where request prompts are disabled, the 422 for the first `system` or
        `developer` message of the items a conversation held (None: none)."""
        index = system_message(items) if self._disabled else None
        return None if index is None else stored_prompt_disabled(str(items[index].get("id")), items[index]["role"])

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
