"""Sealing a compaction summary: AES-256-GCM from `cryptography`, sans-I/O.

An item's `encrypted_content` is `gwc1.<key id>.<base64url(nonce ‖ ciphertext ‖ tag)>`.
The associated data binds it to the format, the key id and the user it was made for,
so a client cannot read it, alter it, forge one, or use another user's: any of those
fails the tag check. Each configured secret becomes a 256-bit key through HKDF-SHA256
(the key id in its `info`), so any replica with the same configuration opens any item.
The first key seals; every key opens (rotation: add a new key first, drop an old one
once its items no longer matter). The keys are the configured ones, or the one the
gateway generated and keeps in its database (`keys.py`), set at start-up with `use()`.
`cryptography`'s primitives (~8 MiB of RSS) are imported on the first item sealed or
opened, not at start-up: compaction is on by default, and most processes never use it.
"""

from __future__ import annotations

import base64
import binascii
import os
from typing import Sequence

from typing import TYPE_CHECKING

from gateway.config.compaction import CompactionKey

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FORMAT = "gwc1"
_NONCE = 12
_INFO = b"gateway compaction key v1:"


class SealError(ValueError):
    """An item this gateway cannot open for this user (the reason is the client's to read)."""


class UnknownKey(SealError):
    """An item sealed with a key that is not (or no longer) configured."""


def _derive(key: CompactionKey) -> "AESGCM":
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    material = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
                    info=_INFO + key.id.encode()).derive(key.secret.encode())
    return AESGCM(material)


def _associated(key_id: str, user_id: str) -> bytes:
    # surrogatepass: whatever string an authentication module made the user id, never a 500.
    return b"\0".join((FORMAT.encode(), key_id.encode(), user_id.encode("utf-8", "surrogatepass")))


class CompactionSeal:
    def __init__(self, keys: Sequence[CompactionKey]):
        self.use(keys)

    def use(self, keys: Sequence[CompactionKey]) -> None:
        """Seal with the first of `keys` from now on, and open what any of them sealed."""
        self._configured = {key.id: key for key in keys}
        self._keys: dict[str, AESGCM] = {}   # derived on first use
        self._current = keys[0].id if keys else None

    @property
    def enabled(self) -> bool:
        return self._current is not None

    def _aead(self, key_id: str) -> "AESGCM | None":
        aead = self._keys.get(key_id)
        if aead is None and key_id in self._configured:
            aead = self._keys[key_id] = _derive(self._configured[key_id])
        return aead

    def seal(self, user_id: str, summary: str) -> str:
        """The `encrypted_content` of a summary made for `user_id` (the newest key)."""
        assert self._current is not None, "no compaction keys configured"
        nonce = os.urandom(_NONCE)
        aead = self._aead(self._current)
        assert aead is not None
        sealed = aead.encrypt(nonce, summary.encode(), _associated(self._current, user_id))
        return f"{FORMAT}.{self._current}.{base64.urlsafe_b64encode(nonce + sealed).decode().rstrip('=')}"

    def open(self, user_id: str, content: str) -> str:
        """The summary an item sealed for `user_id`; SealError for anything else."""
        parts = content.split(".")
        if len(parts) != 3 or parts[0] != FORMAT:
            raise SealError("it was not made by this gateway")
        key_id, body = parts[1], parts[2]
        aead = self._aead(key_id)
        if aead is None:
            raise UnknownKey(f"its key {key_id[:32]!r} is not configured (it was rotated out)")
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError):
            raise SealError("it is not well formed") from None
        if len(raw) < _NONCE + 16:
            raise SealError("it is not well formed")
        from cryptography.exceptions import InvalidTag

        try:
            plain = aead.decrypt(raw[:_NONCE], raw[_NONCE:], _associated(key_id, user_id))
        except InvalidTag:
            raise SealError("it was altered, or made for another user") from None
        return plain.decode()
