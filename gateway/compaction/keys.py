"""Which keys seal and open compaction items (issue 44: compaction on by default).

The operator's `response_compaction.keys` when configured (the first seals). Without
them, a key the gateway generates once and keeps in its database (`GeneratedKeys`), so
every replica and worker on that database, and every restart, seals and opens alike. A
generated key that exists stays an opener after keys are configured, so the items it
sealed keep opening: configuring keys is how to rotate away from it (and deleting its
row, gateway stopped, retires it: docs/compaction.md)."""

from __future__ import annotations

import secrets

from gateway.config.compaction import CompactionKey
from gateway.schema.json_types import JsonObject
from gateway.storage.generated_keys import GeneratedKeys

SETTING = "compaction_key"


def _new_key() -> JsonObject:
    return {"id": f"auto-{secrets.token_hex(4)}", "secret": secrets.token_urlsafe(48)}


async def compaction_keys(configured: list[CompactionKey], stored: GeneratedKeys) -> list[CompactionKey]:
    """The keys, newest (the sealing one) first."""
    generated = await (stored.get(SETTING) if configured else stored.get_or_create(SETTING, _new_key))
    if generated is None:
        return list(configured)
    key = CompactionKey(id=str(generated["id"]), secret=str(generated["secret"]))
    return [*configured, *([key] if key.id not in {k.id for k in configured} else [])]
