"""`compaction` items in a turn's input (sans-I/O): each is opened for the caller and
replaced by one user-role message carrying the summary, before LCORE's request model
sees the request (so forward mode's 422 bodies stay LCORE's for everything else). The
summary is the earlier conversation's, so it is the user's words, never system
instructions. An item this gateway cannot open for this caller is a 422 that names it.

Only a request whose input holds such an item pays for more than one pass over its
items; without configured keys nothing is replaced (the item is LCORE's 422 then).

Items added to a conversation through the Conversations API are opened when added (a
422 then, never later by surprise) and again when a turn takes them (`open_all`, by
`turns/prepare.py`), always for the conversation's owner: the gateway keeps them sealed.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from gateway.compaction.seal import CompactionSeal, SealError
from gateway.schema.errors import ApiError
from gateway.schema.json_types import JsonObject

COMPACTION = "compaction"
# What the model reads before a summary: where it comes from.
SUMMARY_INTRO = "Summary of the earlier conversation (compacted):\n\n"


def has_compaction(input_: Any) -> TypeGuard[list[Any]]:
    return isinstance(input_, list) and any(is_compaction(item) for item in input_)


def is_compaction(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == COMPACTION


def invalid_item(where: str, reason: str, param: str | None = None) -> ApiError:
    return ApiError(422, "Invalid compaction item", f"The compaction item {where} cannot be used: {reason}.",
                    code="invalid_compaction_item", param=param or where)


def summary_message(summary: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": SUMMARY_INTRO + summary}


def opened(seal: CompactionSeal, user_id: str, item: JsonObject, where: str,
           param: str | None = None) -> JsonObject:
    """The user message of the summary `item` seals for `user_id` (422 naming `where`
    when it cannot be opened for them)."""
    if not seal.enabled:
        raise invalid_item(where, "this gateway has no compaction keys configured", param)
    content = item.get("encrypted_content")
    if not isinstance(content, str):
        raise invalid_item(where, "`encrypted_content` must be a string", param)
    try:
        return summary_message(seal.open(user_id, content))
    except SealError as exc:
        raise invalid_item(where, str(exc), param) from None


def open_all(seal: CompactionSeal, user_id: str, items: list[Any], field: str) -> list[Any]:
    """`items` with each compaction item replaced by its summary's user message (422
    naming `field[N]` for one that cannot be opened for `user_id`)."""
    return [opened(seal, user_id, item, f"{field}[{index}]") if is_compaction(item) else item
            for index, item in enumerate(items)]


def open_compactions(seal: CompactionSeal, user_id: str, input_: Any) -> list[Any] | None:
    """`input_` (a request's `input`, left as it is) with its compaction items replaced
    by their summaries' user messages, one for one; None when it held none."""
    if not seal.enabled or not has_compaction(input_):
        return None
    return open_all(seal, user_id, input_, "input")
