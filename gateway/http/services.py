"""What handlers reach through `request.app[SERVICES]`: everything built from the config."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from gateway.background.runs import BackgroundRuns
from gateway.config import Configuration
from gateway.conversations.expiry import ExpirySweep
from gateway.conversations.feedback import FeedbackWriter
from gateway.conversations.forget import Forgetting
from gateway.conversations.transcripts import Transcripts
from gateway.identity import Authenticator
from gateway.quota.service import QuotaService
from gateway.storage.conversation_items import ConversationItems
from gateway.storage.conversations import ConversationRepository
from gateway.storage.database import Database
from gateway.storage.history import ConversationHistory
from gateway.storage.writer import TurnWriter
from gateway.upstream.catalog import ModelCatalog
from gateway.turns.service import TurnService
from gateway.turns.tools import ConfiguredTools
from gateway.upstream.client import UpstreamClient


@dataclass
class Services:
    config: Configuration
    db: Database
    upstream: UpstreamClient
    catalog: ModelCatalog
    conversations: ConversationRepository
    writer: TurnWriter
    turns: TurnService
    authenticator: Authenticator
    background: BackgroundRuns
    quota: QuotaService
    tools: ConfiguredTools               # the operator's MCP servers and stores (`/v1/infer`, `/v1/tools`)
    history: ConversationHistory         # the conversations endpoints' reads and changes
    forgetting: Forgetting               # deleting a conversation and what is kept for it
    feedback: FeedbackWriter
    expiry: ExpirySweep                  # conversation expiry's sweep (idle only without a TTL)
    items: ConversationItems             # OpenAI's Conversations API: metadata, the gateway's items
    transcripts: Transcripts | None = None   # `user_data_collection.transcripts_enabled`
    # Started without its upstream (`llama_stack.allow_degraded_mode`): readiness says
    # so with 200 until the upstream answers.
    degraded: bool = False


SERVICES: web.AppKey[Services] = web.AppKey("services", Services)
# Handlers that answer without authentication.
PUBLIC: web.AppKey[frozenset[Any]] = web.AppKey("public_handlers", frozenset)
# Handlers a request without the module's credential header reaches unauthenticated, as
# LCORE's `skip_for_health_probes` / `skip_for_metrics` allow; with a credential they
# authenticate like every other endpoint.
SKIP_WITHOUT_CREDENTIAL: web.AppKey[frozenset[Any]] = web.AppKey("skip_without_credential", frozenset)
