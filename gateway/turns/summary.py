"""Topic summaries: the short title of a new conversation, stored with its record for
the conversations endpoints (LCORE's `get_topic_summary`).

A turn that starts a stored conversation, and whose request did not say
`generate_topic_summary: false`, makes one extra call through its own backend: the
request's user text under `customization.topic_summary_prompt`, stored nowhere
(`store: false`) and charged to no one. It starts as soon as `prepare()` has created the
conversation, beside the turn itself, so settling (which waits for it, to commit the
summary with the turn's record) rarely waits long.

Unlike LCORE, which loses the turn when the summary call fails, a failed (or slow:
`TIMEOUT`) summary loses nothing: the turn is recorded without one and the reason is
logged. A turn that never gets a result (its client left first) cancels its summary.
"""

from __future__ import annotations

import asyncio
import logging
from gateway.config import CustomizationConfig
from gateway.turns.turn import Backend, Plan, Turn

log = logging.getLogger("gateway.turns")

# Seconds a summary may take before the turn is recorded without it (LCORE waits at most
# as long for one after an interrupted stream).
TIMEOUT = 30.0


class TopicSummaries:
    def __init__(self, customization: CustomizationConfig):
        self._enabled = customization.topic_summaries
        self._prompt = customization.topic_summary_prompt

    def start(self, plan: Plan, question: str) -> asyncio.Future[str] | None:
        """Begin the summary of a turn that starts a stored conversation and asks for
        one: `question` is its user text, redacted (`TurnInput.question`). None: it
        makes none."""
        if not (self._enabled and plan.store and plan.existing is None and plan.conversation_id is not None
                and plan.generate_topic_summary is not False and question):
            return None
        return asyncio.ensure_future(self._summarize(plan.backend, plan.model.id, question, plan.conversation_id))

    async def _summarize(self, backend: Backend, model: str, question: str, conversation_id: str) -> str:
        try:
            summary = await asyncio.wait_for(backend.summarize(model, self._prompt, question), TIMEOUT)
        except asyncio.TimeoutError:
            log.warning("topic summary of conversation %s took over %.0fs: recorded without one",
                        conversation_id, TIMEOUT)
            return ""
        except Exception as exc:  # an ApiError from the upstream, or anything else: never the turn's
            log.warning("topic summary of conversation %s failed: recorded without one (%s)", conversation_id, exc)
            return ""
        return summary.strip()


async def summary_of(turn: Turn) -> str:
    """The turn's topic summary once made ("" when it has none or it failed)."""
    if turn.summary is None or turn.summary.cancelled():
        return ""
    try:
        return await asyncio.shield(turn.summary)
    except Exception:
        return ""
