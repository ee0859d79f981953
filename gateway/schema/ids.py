"""Identifier formats on the wire.

Conversation ids are accepted in three forms (spec 001 and LCORE's `suid`): OpenAI's
`conv_<48 hex>`, LCORE's bare `<48 hex>`, and an RFC 4122 UUID (LCORE's older ids).
The gateway stores the bare form, returns `conv_<48 hex>` from `/v1/responses` (a UUID
as it is: LCORE refuses `conv_<uuid>`) and talks to Llama Stack with the `conv_` form.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import secrets
import uuid

_HEX48 = re.compile(r"^[0-9a-fA-F]{48}$")


def normalize_conversation_id(value: str) -> str | None:
    """The bare stored form of a conversation id, or None if it is not a valid one."""
    bare = value[5:] if value.startswith("conv_") else value
    if _HEX48.match(bare):
        return bare.lower()
    if value.startswith("conv_"):
        return None
    try:
        return str(uuid.UUID(bare))
    except ValueError:
        return None


def openai_conversation_id(bare: str) -> str:
    """The form spec 001 returns: `conv_<48 hex>` (as Llama Stack names them); an older
    UUID id stays a UUID, the only form of it that is accepted back."""
    return f"conv_{bare}" if _HEX48.match(bare) else bare


def sent_form(sent: object) -> str:
    """The form a client named a conversation in, which its responses answer in:
    `object` (OpenAI's `{"id": ...}`), `bare` (LCORE's `<48 hex>`) or `string` (spec 001's
    `conv_<48 hex>`; a UUID, which has no other form, too)."""
    if isinstance(sent, dict):
        return "object"
    if isinstance(sent, str) and _HEX48.match(sent):
        return "bare"
    return "string"


def shown_conversation_id(bare: str, form: str) -> str | dict[str, str]:
    """A stored (bare) id in a form `sent_form` named."""
    if form == "bare":
        return bare
    shown = openai_conversation_id(bare)
    return {"id": shown} if form == "object" else shown


# New ids are a keyed hash of a counter: as unguessable as random ones (the key is 32
# random bytes, never shown) without a getrandom() call per id, which releases the GIL
# and can leave the turn waiting for it (several ids per engine turn).
_ID_KEY = secrets.token_bytes(32)
_ID_COUNTER = itertools.count()


def _new_hex48() -> str:
    return hashlib.blake2b(next(_ID_COUNTER).to_bytes(8, "little"), key=_ID_KEY, digest_size=24).hexdigest()


def new_conversation_id() -> str:
    return _new_hex48()


def new_item_id(prefix: str) -> str:
    """An OpenAI-style object id: `resp`, `msg`, `fc`, `rs`… + `_` + 48 hex."""
    return f"{prefix}_{_new_hex48()}"
