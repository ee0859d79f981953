"""`compaction` items in a turn's input (sans-I/O): each is opened for the caller and
replaced by one user-role message carrying the summary, before LCORE's request model
sees the request (so forward mode's 422 bodies stay LCORE's for everything else). The
summary is the earlier conversation's, so it is the user's words, never system
instructions. An item this gateway cannot open for this caller is a 422 that names it.

Only a request whose input holds such an item pays for more than one pass over its
items; without configured keys nothing is replaced (the item is LCORE's 422 then).
"""

from __future__ import annotations

from typing import Any

from gateway.compaction.seal import CompactionSeal, SealError
from gateway.schema.errors import ApiError

COMPACTION = "compaction"
# What the model reads before a summary: where it comes from.
SUMMARY_INTRO = "Summary of the earlier conversation (compacted):\n\n"


def has_compaction(input_: Any) -> bool:
    return isinstance(input_, list) and any(isinstance(item, dict) and item.get("type") == COMPACTION
                                            for item in input_)


def invalid_item(index: int, reason: str) -> ApiError:
    return ApiError(422, "Invalid compaction item",
                    f"The compaction item input[{index}] cannot be used: {reason}.",
                    code="invalid_compaction_item", param=f"input[{index}]")


def summary_message(summary: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": SUMMARY_INTRO + summary}


def expand(seal: CompactionSeal, user_id: str, raw: Any) -> Any:
    """Replace the compaction items of `raw["input"]` (in place) with their summaries;
    returns the input as the client sent it, or None when it held none."""
    input_ = raw.get("input") if isinstance(raw, dict) and seal.enabled else None
    if not has_compaction(input_):
        return None
    expanded: list[Any] = []
    for index, item in enumerate(input_):
        if not isinstance(item, dict) or item.get("type") != COMPACTION:
            expanded.append(item)
            continue
        content = item.get("encrypted_content")
        if not isinstance(content, str):
            raise invalid_item(index, "`encrypted_content` must be a string")
        try:
            expanded.append(summary_message(seal.open(user_id, content)))
        except SealError as exc:
            raise invalid_item(index, str(exc)) from None
    raw["input"] = expanded
    return input_
