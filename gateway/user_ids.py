"""How a log line names a user: as the access line does, by the keyed HMAC-SHA-256 of
the id (`UserHasher`, keyed by `OTEL_ANONYMIZATION_SECRET`), or by the raw id where the
operator asks for it (`service.audit_user_ids: raw`).

The access line and the spans always carry the hash (`observability/`). Every other line
that names a user reads the process's rule here: the audit lines (`gateway.audit`: a
refused request, a quota change) and the quota's error lines. The wiring sets the rule
once from the configuration (`use`), with the access line's own hasher, so one user has
one name in every line; until then ids are hashed under a key of this module's own.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Callable, Mapping

ANONYMIZATION_SECRET = "OTEL_ANONYMIZATION_SECRET"
# Without that secret: the random key the supervisor of `service.workers` gives all its
# workers (http/supervisor.py), so a user has one hash across the group, as in one process.
GROUP_KEY = "GATEWAY_WORKERS_HASH_KEY"
# Distinct user ids remembered with their hash: one HMAC per new user, not per request.
_HASHES_KEPT = 4096
# What a text access line shows of a hash: enough to tell users apart by eye.
SHORT_HASH = 16


class UserHasher:
    """A user id → the hex HMAC-SHA-256 of it under the anonymisation key. Without
    `OTEL_ANONYMIZATION_SECRET` the key is random per process: ids still never appear,
    but the same user hashes differently on each replica and after a restart (the
    workers of one `gateway serve` share theirs)."""

    def __init__(self, environ: Mapping[str, str] | None = None):
        env = os.environ if environ is None else environ
        secret = env.get(ANONYMIZATION_SECRET)
        self.keyed = bool(secret)
        group = env.get(GROUP_KEY)
        self._key = secret.encode() if secret else bytes.fromhex(group) if group else os.urandom(32)
        self._known: dict[str, str] = {}

    def __call__(self, user_id: str) -> str:
        known = self._known.get(user_id)
        if known is None:
            known = hmac.new(self._key, user_id.encode(), hashlib.sha256).hexdigest()
            if len(self._known) >= _HASHES_KEPT:
                self._known.clear()
            self._known[user_id] = known
        return known


@dataclass(frozen=True, slots=True)
class LoggedUsers:
    """The rule: `raw` ids, or the hash cut to `width` hex digits (the access line's:
    16 in text lines, the whole hash in JSON ones)."""

    hasher: Callable[[str], str]
    raw: bool = False
    width: int = SHORT_HASH

    def __call__(self, user_id: str | None) -> str | None:
        if user_id is None:
            return None
        return user_id if self.raw else self.hasher(user_id)[:self.width]


_RULE = LoggedUsers(UserHasher())


def use(rule: LoggedUsers) -> None:
    """The process's rule (set by the wiring, from `service.audit_user_ids`)."""
    global _RULE
    _RULE = rule


def logged_user(user_id: str | None) -> str | None:
    """A user id as log lines name it (None stays None: nobody)."""
    return _RULE(user_id)
