"""The output items a server-side tool's calls are shown as, declared by the tool that
emits them (`file_search.py`, `web_search.py`, `mcp_types.py`), so the emitter streams
any of them by its lifecycle without knowing which tool it belongs to.

The lifecycles are those of the `openai` package's event types:
- `ARGUMENTS` (`mcp_call`): `response.<type>_arguments.delta` as the model writes the
  arguments, `….done` and `response.<type>.in_progress` when they are complete, then
  `response.<type>.completed` or `….failed` when the call ends;
- `SEARCH` (`file_search_call`, `web_search_call`): no argument events (the item shows
  its query at the end), `….in_progress` and `….searching` before the call runs,
  `….completed` when it ends, even failed (the types have no `failed` event for them:
  a failure is the item's status); the result sets only the item's own fields;
- `APPROVAL` (`mcp_approval_request`): shown whole once its arguments are complete,
  never run (the client answers it next turn);
- `LISTING` (`mcp_list_tools`): not a call; `….in_progress`, then `….completed` or
  `….failed` (`Emitter.list_started` / `list_done`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Lifecycle(enum.Enum):
    ARGUMENTS = "arguments"
    SEARCH = "search"
    APPROVAL = "approval"
    LISTING = "listing"


@dataclass(slots=True, frozen=True)
class ItemKind:
    type: str               # the item's `type`
    id_prefix: str          # of its `id` (`fs_…`)
    lifecycle: Lifecycle


@dataclass(slots=True, frozen=True)
class CallItem:
    """How the calls of one tool name are shown (`Emitter.call_items`): the kind, and the
    item's fields fixed before the call starts (its server, its tool's own name…)."""

    kind: ItemKind
    fields: dict[str, Any]
