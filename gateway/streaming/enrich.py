"""Add what LCORE clients expect to response objects, and take out what they must not
see (sans-I/O).

Every response object (a JSON body, or the `response` of a lifecycle event) gets
`conversation` (null for a `store: false` turn in no conversation); the model the
gateway chose is shown without its provider prefix, as LCORE shows it, and the operator's
system prompt as LCORE's placeholder (`<server prompt applied>`); the `tools` echo
loses what the gateway attached (MCP credentials and configured servers' URLs), and so
do the upstream's error messages (the response's `error`, items' errors: `redactor`).
`response.in_progress` gets `available_quotas: {}` and `output_text: ""`; the terminal
event (or the JSON body) gets the balance after the turn was settled and the full
`output_text`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.redaction import NOTHING, Redactor
from gateway.schema.json_types import JsonObject
from gateway.streaming.events import RESPONSE_EVENTS, TERMINAL_EVENTS, Event

_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})
# What a response shows as its `instructions` when they were the operator's system prompt
# (LCORE's `SUBSTITUTED_INSTRUCTIONS_PLACEHOLDER`): the server's prompt is not the client's to read.
SERVER_PROMPT_PLACEHOLDER = "<server prompt applied>"

def output_text(response: JsonObject) -> str:
    """The concatenated text of the response's assistant messages, like the SDK's."""
    texts = []
    for item in response.get("output") or []:
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
    return "".join(texts)


def scrub_tool_echo(response: JsonObject, configured_labels: frozenset[str]) -> None:
    """Remove from a response object's `tools` what the gateway attached: the
    credentials of every MCP tool, and the URL of the servers the operator configured."""
    tools = response.get("tools")
    if not isinstance(tools, list):
        return
    for tool in tools:
        if isinstance(tool, dict) and tool.get("type") == "mcp":
            tool.pop("authorization", None)
            tool.pop("headers", None)
            if tool.get("server_label") in configured_labels:
                tool.pop("server_url", None)


@dataclass
class Enricher:
    # `conv_<48 hex>` as spec 001 returns it, or OpenAI's `{"id": "conv_…"}` (the form the
    # client sent, or the operator's: `service.conversation_form`); None: null. Only
    # response objects carry it (lifecycle events, JSON bodies): the fast path's
    # pass-through events never do, so the form costs them nothing.
    conversation: str | dict[str, str] | None
    previous_response_id: str | None    # echoed even when the upstream drops it
    model: str | None = None            # shown instead of the upstream's when the gateway chose it
    configured_labels: frozenset[str] = frozenset()
    background: bool = False            # the gateway runs the turn detached: the upstream never knew
    redactor: Redactor = NOTHING        # what the gateway injected, out of the upstream's words
    server_prompt: bool = False         # the instructions are the operator's: LCORE's placeholder instead

    def apply(self, event: Event) -> Event:
        """Enrich a non-terminal event (terminal ones go through `terminal`)."""
        if event.type in RESPONSE_EVENTS:
            response = event.data["response"]
            self.annotate(response)
            if event.type == "response.in_progress":
                response["available_quotas"] = {}
                response["output_text"] = ""
        elif event.type in _ITEM_EVENTS and self.redactor:
            self.redactor.item(event.data.get("item"))
        return event

    def terminal(self, event: Event, available_quotas: dict[str, int]) -> Event:
        assert event.type in TERMINAL_EVENTS
        self.finish(event.data["response"], available_quotas)
        return event

    def finish(self, response: JsonObject, available_quotas: dict[str, int]) -> JsonObject:
        self.annotate(response)
        response["available_quotas"] = available_quotas
        response["output_text"] = output_text(response)
        if response.get("status") == "completed" and not response.get("completed_at"):
            response["completed_at"] = int(time.time())
        return response

    def annotate(self, response: JsonObject) -> None:
        conversation = self.conversation
        # A copy per response object: events are encoded later, and the same dict in two
        # places is safe only while nobody changes it.
        response["conversation"] = conversation if conversation.__class__ is not dict else dict(conversation)
        if self.background:
            response["background"] = True
        if self.previous_response_id and not response.get("previous_response_id"):
            response["previous_response_id"] = self.previous_response_id
        if self.model is not None and "model" in response:
            response["model"] = self.model
        if self.server_prompt:
            response["instructions"] = SERVER_PROMPT_PLACEHOLDER
        if response.get("tools"):
            scrub_tool_echo(response, self.configured_labels)
        if self.redactor:
            self.redactor.response(response)
