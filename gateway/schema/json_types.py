"""Names for the Responses API's JSON objects as they cross the gateway's packages.

`JsonObject` is a JSON object read from or written to the wire as the gateway passes
it on: a request body, a response, a stream event's data, an item. The gateway reads a
few of its fields and forwards the rest untouched, so it stays a plain dict (no
validation or copy on the hot path); the name says so where such a value crosses a
package. Values the gateway builds and reads field by field have TypedDicts (no runtime
cost): `ResponseUsage` here, others beside their builder (e.g. `schema/errors.ErrorBody`,
`quota/admin.Quotas`).
"""

from __future__ import annotations

from typing import Any, TypeAlias, TypedDict

JsonObject: TypeAlias = dict[str, Any]


class InputTokensDetails(TypedDict):
    cached_tokens: int
    cache_write_tokens: int


class OutputTokensDetails(TypedDict):
    reasoning_tokens: int


class ResponseUsage(TypedDict):
    """A response's `usage` as the engine reports it (`engine/translate.usage_of`, summed
    over the rounds by `add_usage`) and the turn charges it (`Turn.round_ended`). A
    relayed upstream response's `usage` stays in its `JsonObject` and is read with `.get`."""
    input_tokens: int
    output_tokens: int
    total_tokens: int
    input_tokens_details: InputTokensDetails
    output_tokens_details: OutputTokensDetails
