"""A turn's input, normalised once in `prepare()` (issues 39, 40): what every reader
after that step reads, so none of them can see the text the client sent.

The request's `input` as the client sent it is read twice, both times in `prepare()`:
its `compaction` items are opened (`open_compactions`, before LCORE's request model,
which does not know them), then `normalize` makes the `TurnInput`: the redaction
shields the turn selected run over the opened items (`Shields.redaction`), the question
is read from the result (the client's own words: a compaction item's summary is no
question). `prepare()` then refuses a `system` or `developer` message where the
operator disabled request system prompts (`turns/prompts.py`). The backend's body,
the question-validity shields, the stored question, the topic summary, the items taken
from the conversation and the input a turn appends to an upstream's conversation all
read the `TurnInput`; the request dict `prepare()` passes on carries its items as
`input` (`TurnInput.request`), so no copy of the client's text is left to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from gateway.compaction.items import is_compaction
from gateway.schema.json_types import JsonObject
from gateway.turns.body import answers_approval, as_input, input_items, question_text

# The selected redaction shields over an input (`Shields.redaction`): a new input, the
# one given untouched where no rule applies.
Rewrite = Callable[[Any], Any]


def _unchanged(input_: Any) -> Any:
    return input_


@dataclass(frozen=True, slots=True)
class TurnInput:
    """What the model reads (`items`: compaction items opened, redacted) and what the
    gateway keeps of it (`question`: the user text of the client's own messages,
    redacted; "" for a turn that asks none, such as tool outputs sent back)."""

    items: Any                           # a string, or a list of items (None: no input)
    question: str

    @property
    def answers_approval(self) -> bool:
        """Whether the input answers an MCP approval request."""
        return answers_approval(self.items)

    def request(self, raw: JsonObject) -> JsonObject:
        """The request with this input as its `input` (what the backends build from)."""
        return {**raw, "input": self.items}

    def with_added(self, added: Sequence[dict[str, Any]], redact: Rewrite = _unchanged,
                   keep_ids: bool = False) -> "TurnInput":
        """The items clients added to the conversation (`conversations/openai.py`,
        compaction items already opened), redacted, before this input; the question
        stays this turn's own. `keep_ids`: their messages keep their ids (an upstream's
        conversation keeps them under those)."""
        given = redact([as_input(item, keep_ids) for item in added])
        return TurnInput([*given, *input_items(self.items)], self.question)


def normalize(given: Any, opened: list[Any] | None, redact: Rewrite = _unchanged) -> TurnInput:
    """The turn's input from `given` (the `input` as the client sent it) and `opened`
    (it with its compaction items opened, one message each: `open_compactions`; None
    when it held none)."""
    items = redact(given if opened is None else opened)
    if opened is None:
        return TurnInput(items, question_text(items))
    # The summaries stand where their items stood: the question is the rest.
    own = [item for item, sent in zip(items, given) if not is_compaction(sent)]
    return TurnInput(items, question_text(own))
