"""What a turn reserves: its estimate (`estimate`) and the `Reservation` it carries from
admission to its charge; the `Charge` that ends it.

The estimate: the request's `input` and `instructions` at four characters a token
(their JSON text), plus `max_output_tokens`, or `output_reservation` without it
(`Reservation.output`, what each engine round reserves for its answer). Once the
conversation is known, the context the turn sends on top (`context_estimate`): the
previous turn's reported input + output tokens, the tools' definitions and what a
file_search tool may bring back; `QuotaService.extend` reserves it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from gateway.quota.balances import Pair
from gateway.quota.holds import Hold, Holds
from gateway.quota.ledger import Balance
from gateway.quota.store import Usage
from gateway.schema.json_types import JsonObject


@dataclass(slots=True, eq=False)   # not frozen: a frozen dataclass costs a turn ~1 µs more to make
class Reservation:
    user_id: str
    tokens: int
    pairs: tuple[Pair, ...]
    balances: tuple[Balance, ...] = ()   # SQLite: the ledger's, in the order of `pairs`
    holds: tuple[Hold, ...] = ()         # PostgreSQL: this replica's holds it reserved on (`holds.py`)
    open: bool = True                    # until its end is known (`end`)
    output: int = 0                      # the output tokens a round reserves (`output_tokens`)

    def end(self, released: bool) -> None:
        """The turn's end on PostgreSQL, once: its holds stop counting it as used, and
        lose its tokens when its committed charge took them off the rows (`released`)."""
        if self.open:
            self.open = False
            Holds.ended(self.holds, self.tokens, released)



class Charge(NamedTuple):   # a tuple: immutable, and cheaper to make than a frozen dataclass
    """The end of a turn's reservation: `tokens` charged to each of its balances, its
    token history (`usage`, None when not kept). What the turn writer carries to the
    quota service's statements when the turn's record commits with it
    (`storage/batch.py`), or what `write` commits on its own."""

    reservation: Reservation
    tokens: int
    usage: Usage | None = None


def estimate(raw: Any, output_reservation: int) -> int:
    """The tokens a request reserves at admission (see the module docstring)."""
    given = raw.get("input")
    # A string's JSON text is its length and two quotes (escapes aside): no need to make it.
    size = 0 if given is None else len(given) + 2 if given.__class__ is str else len(orjson.dumps(given))
    if isinstance(raw.get("instructions"), str):
        size += len(raw["instructions"])
    return math.ceil(size / 4) + output_tokens(raw, output_reservation)


def output_tokens(raw: Any, output_reservation: int) -> int:
    """What one round reserves for its answer: `max_output_tokens`, else the operator's."""
    output = raw.get("max_output_tokens")
    if not isinstance(output, int) or isinstance(output, bool) or output <= 0:
        output = output_reservation
    return output


# What one file_search result may add to the context (a chunk as the model reads it),
# and the results a tool brings without `max_num_results` (engine/file_search.py's).
RAG_RESULT_TOKENS = 256
RAG_RESULTS = 10


def context_estimate(previous_tokens: int, tools: list[JsonObject] | None) -> int:
    """What the turn sends beyond its own input: the history (the previous turn's
    reported input + output tokens: what it sent and got back, which this turn sends
    again), the tools' definitions, and configured RAG's share (each file_search
    tool's results, at most `max_num_results` chunks)."""
    tokens = max(0, previous_tokens)
    if tools:
        tokens += math.ceil(len(orjson.dumps(tools)) / 4)
        for tool in tools:
            if isinstance(tool, dict) and tool.get("type") == "file_search":
                results = tool.get("max_num_results")
                count = results if isinstance(results, int) and not isinstance(results, bool) and results > 0 \
                    else RAG_RESULTS
                tokens += min(count, 50) * RAG_RESULT_TOKENS
    return tokens
