"""Add what LCORE clients expect to response objects (sans-I/O).

Every object that carries a `response` gets `conversation`; `response.in_progress`
gets `available_quotas: {}` and `output_text: ""`; the terminal event gets the
balance after the turn was settled and the full `output_text`. Response bodies
(`stream: false`) get the same through `enrich_response`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from gateway.streaming.events import RESPONSE_EVENTS, TERMINAL_EVENTS, Event


def output_text(response: dict[str, Any]) -> str:
    """The concatenated text of the response's assistant messages, like the SDK's."""
    texts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
    return "".join(texts)


@dataclass
class Enricher:
    conversation: str | None            # `conv_<48 hex>` as spec 001 returns it
    previous_response_id: str | None    # echoed even when the upstream drops it

    def apply(self, event: Event) -> Event:
        """Enrich a non-terminal event (terminal ones go through `terminal`)."""
        if event.type in RESPONSE_EVENTS:
            response = event.data["response"]
            self.annotate(response)
            if event.type == "response.in_progress":
                response["available_quotas"] = {}
                response["output_text"] = ""
        return event

    def terminal(self, event: Event, available_quotas: dict[str, int]) -> Event:
        assert event.type in TERMINAL_EVENTS
        self.finish(event.data["response"], available_quotas)
        return event

    def finish(self, response: dict[str, Any], available_quotas: dict[str, int]) -> dict[str, Any]:
        self.annotate(response)
        response["available_quotas"] = available_quotas
        response["output_text"] = output_text(response)
        if response.get("status") == "completed" and not response.get("completed_at"):
            response["completed_at"] = int(time.time())
        return response

    def annotate(self, response: dict[str, Any]) -> None:
        if self.conversation is not None:
            response["conversation"] = self.conversation
        if self.previous_response_id and not response.get("previous_response_id"):
            response["previous_response_id"] = self.previous_response_id
