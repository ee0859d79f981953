"""Which backend runs a turn (`BackendSelector`): chosen once, when a turn is prepared;
nothing downstream asks which it has."""

from __future__ import annotations

from gateway.turns.turn import Backend
from gateway.upstream.capabilities import Capabilities


class BackendSelector:
    """Which backend runs turns: the engine where the configuration (or, for `auto`,
    the upstream) says turns run locally, else the forward backend. Decided on first
    use and kept; a failed probe is asked again next time."""

    def __init__(self, forward: Backend, engine: Backend, capabilities: Capabilities):
        self._forward = forward
        self._engine = engine
        self._capabilities = capabilities
        self._chosen: Backend | None = None

    async def close(self) -> None:
        for backend in (self._forward, self._engine):
            await backend.close()

    async def __call__(self) -> Backend:
        if self._chosen is None:
            self._chosen = self._engine if await self._capabilities.uses_engine() else self._forward
        return self._chosen
