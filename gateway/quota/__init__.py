"""Token quotas. This version has no limiters yet (`quota_handlers` is accepted and
ignored), so checks always pass and `available_quotas` is `{}`; the pipeline already
calls `check` before a turn and `settle` before the terminal event, so limiters slot in
here without touching the request path."""

from __future__ import annotations

from gateway.identity import Identity


class QuotaService:
    # No limiters: nothing to check or consume, so the pipeline skips the settle step.
    enabled = False

    async def check(self, identity: Identity) -> None:
        """Raise 429 when a limiter has nothing left (no limiters yet)."""

    async def settle(self, identity: Identity, input_tokens: int, output_tokens: int) -> dict[str, int]:
        """Consume the turn's tokens and return the balance after it, per limiter."""
        return {}
