"""Wiring: build every service from the configuration, register the routes, and start
and stop them with the application."""

from __future__ import annotations

import asyncio
import logging
import uuid
from functools import partial
from typing import Any, AsyncIterator

from aiohttp import web

from gateway.background.runs import BackgroundRuns
from gateway.background.watch import BackgroundWatch
from gateway.config import Configuration
from gateway.engine.backend import LocalEngine
from gateway.engine.guardrails import Moderation
from gateway.engine.images import image_policy
from gateway.engine.mcp_tools import McpTools, mcp_limits
from gateway.engine.vector_search import FileSearchExecutor
from gateway.engine.web_search import WebSearchExecutor
from gateway.http import catalog as catalog_routes
from gateway.conversations.expiry import ExpirySweep
from gateway.conversations.feedback import FeedbackWriter
from gateway.conversations.forget import Forgetting
from gateway.conversations.transcripts import Transcripts
from gateway.http import authorized, feedback, health, infer, query, quotas, responses, root, shields, tools
from gateway.http import compact, configuration, providers
from gateway.http import conversations as conversation_routes
from gateway.http import openai_conversations
from gateway.http import metrics as metrics_routes
from gateway.http import websocket
from gateway.http.drain import DRAIN, Drain
from gateway.http.middleware import gateway_middleware
from gateway.http.operations import route_actions
from gateway.http.responses_io import MAX_JSON_ITEMS
from gateway.http.services import PUBLIC, SERVICES, SKIP_WITHOUT_CREDENTIAL, Services
from gateway.identity.build import build_authenticator
from gateway.observability import startup
from gateway.observability.calls import EngineMetrics, UpstreamMetrics
from gateway.observability.http import HttpObserver
from gateway.observability.metrics import Metrics
from gateway.observability.observers import RequestObservers
from gateway.observability.state import StateCollector, time_database
from gateway.observability.turns import ClusterBalances, TurnMetrics
from gateway.quota.service import QuotaService, open_quota
from gateway.schema.limits import RequestLimits
from gateway.compaction.keys import compaction_keys
from gateway.compaction.seal import CompactionSeal
from gateway.storage.conversation_items import ConversationItems
from gateway.storage.conversations import ConversationRepository
from gateway.storage.database import Database
from gateway.storage.generated_keys import GeneratedKeys
from gateway.storage.background_responses import BackgroundStore
from gateway.storage.open import open_database
from gateway.storage.running_turns import RunningTurnsStore
from gateway.storage.engine_responses import ResponseStore
from gateway.storage.feedback import FeedbackStore
from gateway.storage.history import ConversationHistory, expired
from gateway.storage.writer import TurnWriter
from gateway.turns.tools import ConfiguredTools
from gateway.turns.forward import ForwardBackend
from gateway.turns.local import EngineBackend
from gateway.turns.owned import OwnedTurns
from gateway.turns.backend_choice import BackendSelector
from gateway.turns.in_progress import SharedInProgress
from gateway.turns.prepare import Preparer
from gateway.turns.run import Runner
from gateway.turns.service import TurnService
from gateway import user_ids
from gateway.user_ids import SHORT_HASH, LoggedUsers
from gateway.turns.settle import Settler
from gateway.upstream.capabilities import Capabilities
from gateway.upstream.catalog import ModelCatalog
from gateway.upstream.client import UpstreamClient
from gateway.upstream.responses_api import UpstreamResponses

log = logging.getLogger("gateway")


async def build_services(config: Configuration, metrics: Metrics | None = None,
                         observers: RequestObservers | None = None, seal: CompactionSeal | None = None) -> Services:
    db = await open_database(config.database)
    tools = ConfiguredTools(config)
    upstream = UpstreamClient(config.llama_stack, redact=tools.redactor.text)
    if metrics is not None:
        upstream.hooks = UpstreamMetrics(metrics)
        time_database(db, metrics)
    if observers is not None:   # the access line's upstream time, the traces' spans and traceparent
        observers.upstream(upstream, upstream.hooks)
    await upstream.start()
    catalog = ModelCatalog(upstream, config.llama_stack.models_cache_seconds)
    conversations = ConversationRepository(db)
    items = ConversationItems(db)   # OpenAI's Conversations API's items and metadata
    await items.load()
    quota = await open_quota(config.quota_handlers, db, config.database)
    if observers is not None:
        quota = observers.quota(quota)
    quota.start()
    writer = TurnWriter(conversations, quota.batch)   # the turns' charges commit with their records
    if observers is not None:
        writer.hooks = observers.writer()
    writer.start()
    capabilities = Capabilities(upstream, config.llama_stack)
    # Every engine provider's base URL has a circuit breaker of its own, set as the upstream's.
    circuit = (config.llama_stack.circuit_breaker_failures, config.llama_stack.circuit_breaker_cooldown_seconds)
    file_search = FileSearchExecutor(upstream, config.byok_rag, circuit)
    web_search = WebSearchExecutor(config.web_search, circuit)
    moderation = Moderation.of(config.guardrails, upstream, circuit)
    engine = LocalEngine(upstream, ResponseStore(db), config.inference,
                         [McpTools(config.mcp_servers, tools.client_mcp, mcp_limits(config.client_tools)),
                          file_search, web_search],
                         moderation,
                         images=image_policy(config.client_tools.allowed_image_destinations))
    await engine.start()
    if metrics is not None:
        engine.hooks = EngineMetrics(metrics)
        metrics.registry.register(StateCollector(
            capabilities, config.llama_stack.api, db, upstream.breaker, upstream.connections,
            [*web_search.breakers(), *file_search.breakers(), *moderation.breakers()]))
    if observers is not None:
        engine.hooks = observers.engine(engine.hooks)
    turns = _turns(config, conversations, writer, catalog, quota, tools,
                   settler=Settler(writer, quota, items), forward=UpstreamResponses(upstream, capabilities),
                   engine=engine, capabilities=capabilities, items=items, metrics=metrics, seal=seal,
                   shared_db=db if db.shared else None)
    for hooks in observers.turn_hooks() if observers is not None else ():
        turns.runner.hooks.add(hooks)
    # Which process runs a background response (a replica of several on PostgreSQL).
    runs = BackgroundRuns(turns.runner, BackgroundStore(db), uuid.uuid4().hex)
    if metrics is not None:
        metrics.metric("gateway_background_responses_running").read_from(runs.count)
    return Services(config=config, db=db, upstream=upstream, catalog=catalog, conversations=conversations,
                    writer=writer, turns=turns, quota=quota, items=items, tools=tools,
                    authenticator=_traced(observers, build_authenticator(config.authentication, config.role_rules,
                                                                         config.access_rules)),
                    background=runs, **_conversation_services(config, db, conversations, turns))


def _traced(observers: RequestObservers | None, authenticator: Any) -> Any:
    return observers.authenticator(authenticator) if observers is not None else authenticator


def _conversation_services(config: Configuration, db: Database, conversations: ConversationRepository,
                           turns: TurnService) -> dict[str, Any]:
    """What the conversations and feedback endpoints use, with their background tasks
    started: the upstream deletions' retries, the expiry sweep (with an idle TTL) and the
    transcripts' writer (when enabled: a hook on every settled turn)."""
    ttl = config.conversation_expiry.idle_ttl_seconds
    history = ConversationHistory(db, conversations, partial(expired, ttl=ttl) if ttl else None)
    forgetting = Forgetting(history, turns.backend)
    forgetting.start()
    expiry = ExpirySweep(config.conversation_expiry, db, history, forgetting)
    expiry.start()
    transcripts = None
    if config.user_data_collection.transcripts_enabled:
        transcripts = Transcripts(config.user_data_collection.transcripts_storage or ".")
        transcripts.start()
        turns.runner.hooks.add(transcripts)   # queued when a turn settles, written off its path
        forgetting.also.append(transcripts.forget)
    return {"history": history, "forgetting": forgetting, "expiry": expiry, "transcripts": transcripts,
            "feedback": FeedbackWriter(config.user_data_collection, FeedbackStore(db))}


def _turns(config: Configuration, conversations: ConversationRepository, writer: TurnWriter, catalog: ModelCatalog,
           quota: QuotaService, tools: ConfiguredTools, *, settler: Settler, forward: UpstreamResponses,
           engine: LocalEngine, capabilities: Capabilities, items: ConversationItems,
           metrics: Metrics | None = None, seal: CompactionSeal | None = None,
           shared_db: Database | None = None) -> TurnService:
    """A turn's life, with both backends: the selector picks one on first use.
    `shared_db`: a database other processes share, which holds the per-user cap of
    running turns with them (`turns/in_progress.py`)."""
    owned = OwnedTurns(conversations, settler)   # the recorded turns, read after any being recorded here
    forwarding = ForwardBackend(forward, tools, config.inference, conversations, owned)
    local = EngineBackend(engine, tools, config.inference, conversations, owned)
    selector = BackendSelector(forwarding, local, capabilities)
    preparer = Preparer(config, owned, writer, catalog, quota, tools, selector, items, seal)
    if shared_db is not None:
        preparer.in_progress = SharedInProgress(config.service.max_responses_in_progress_per_user,
                                                RunningTurnsStore(shared_db, uuid.uuid4().hex))
    preparer.in_progress.start()
    runner = Runner(settler, tools.labels, tools.redactor)
    runner.deadline = config.llama_stack.turn_deadline_seconds
    if metrics is not None:
        cluster = frozenset(limiter.name for limiter in (config.quota_handlers.limiters if config.quota_handlers else ())
                            if limiter.type == "cluster_limiter")
        runner.hooks.add(TurnMetrics(metrics, {id(forwarding): "forward", id(local): "engine"}, tools.labels))
        if cluster:
            runner.hooks.add(ClusterBalances(metrics, cluster))
    service = config.service
    limits = RequestLimits(input_items=service.max_input_items, tools=service.max_tools,
                           include=service.max_include_entries, attachments=service.max_attachments)
    return TurnService(preparer, runner, settler, owned, selector, limits)


async def _reach_upstream(services: Services, metrics: Metrics | None) -> None:
    """Ask the upstream for its models once at start-up. Unreachable: with
    `llama_stack.allow_degraded_mode` the gateway is degraded (readiness 200 with
    LCORE's degraded body until the upstream answers); without it, not ready."""
    config = services.config
    try:
        models = await services.catalog.fresh()
    except Exception as exc:  # any failure to reach it: it is not there
        models = None
        services.degraded = config.llama_stack.allow_degraded_mode
        log.warning("upstream %s unreachable at start-up%s: %s", config.llama_stack.url,
                    " (allow_degraded_mode: starting degraded)" if services.degraded else "", exc)
    if metrics is not None:
        startup.started(metrics, models, config.inference, services.degraded)


def create_app(config: Configuration) -> web.Application:
    actions: dict[Any, str] = {}
    # Each application its own registry: never the process-global one.
    metrics = Metrics() if config.service.metrics else None
    observer = HttpObserver(metrics, config.service.root_path, config.authentication.module) if metrics else None
    observers = RequestObservers(config)   # the access line, and the traces when OTEL_* turn them on
    # Every other line that names a user names it as the access line does, unless raw is asked for.
    user_ids.use(LoggedUsers(observers.hasher, raw=config.service.audit_user_ids == "raw",
                             width=SHORT_HASH if config.service.access_log_format == "text" else 64))
    app = web.Application(client_max_size=config.service.max_request_body_bytes,
                          middlewares=[gateway_middleware(config.service, config.authentication, actions, observer,
                                                          observers.middleware)])
    # One seal for compaction items: the endpoint's and the turns'; its keys set at start-up.
    seal = app[compact.SEAL] = CompactionSeal(config.response_compaction.keys)
    prefixes = [""] + ([config.service.root_path] if config.service.root_path else [])
    for prefix in prefixes:
        compact.add_routes(app, prefix, config)   # before /v1/responses/{response_id}
        responses.add_routes(app, prefix)
        catalog_routes.add_routes(app, prefix)
        health.add_routes(app, prefix)
        root.add_routes(app, prefix)
        authorized.add_routes(app, prefix)
        quotas.add_routes(app, prefix)
        query.add_routes(app, prefix)
        infer.add_routes(app, prefix, config)
        tools.add_routes(app, prefix)
        shields.add_routes(app, prefix)
        providers.add_routes(app, prefix)
        configuration.add_routes(app, prefix)
        conversation_routes.add_routes(app, prefix)
        openai_conversations.add_routes(app, prefix)
        feedback.add_routes(app, prefix)
        if metrics is not None:
            metrics_routes.add_routes(app, prefix)
    actions.update(route_actions(app.router.routes(), config.service.root_path,  # a route without one: no start
                                 rules_configured=bool(config.access_rules)))
    app[PUBLIC] = root.PUBLIC_HANDLERS | feedback.PUBLIC_HANDLERS
    app[MAX_JSON_ITEMS] = config.service.max_json_items
    app[SKIP_WITHOUT_CREDENTIAL] = (health.PROBE_HANDLERS if config.authentication.skip_for_health_probes
                                    else frozenset()) | (metrics_routes.METRICS_HANDLERS
                                                         if config.authentication.skip_for_metrics else frozenset())
    if metrics is not None:
        app[metrics_routes.METRICS] = metrics
    app[DRAIN] = Drain(config.service.shutdown_grace_seconds)   # SIGTERM's graceful drain (http/server.py)

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        services = await build_services(config, metrics, observers, seal)
        app[SERVICES] = services
        # The configured compaction keys, or the one generated once for this database.
        seal.use(await compaction_keys(config.response_compaction.keys, GeneratedKeys(services.db)))
        await _reach_upstream(services, metrics)
        watch = BackgroundWatch(services.background)
        await watch.start()  # unfinished background responses of a stopped gateway: failed
        folding = asyncio.ensure_future(metrics.folding()) if metrics is not None else None
        for warning in config.warnings():
            log.warning("configuration: %s", warning)
        for warning in config.authentication.warnings():
            log.warning("security: %s", warning)
        yield
        if folding is not None:
            folding.cancel()
        await watch.close()
        await services.expiry.close()
        await services.forgetting.close()
        await services.background.close()
        await services.turns.drain()
        if services.transcripts is not None:
            await services.transcripts.close()   # every settled turn's transcript written
        await services.writer.close()
        await services.quota.close()
        await services.upstream.close()
        await services.turns.close()
        await services.authenticator.close()
        if metrics is not None:
            metrics.close()   # a worker's last counts, every turn's in, where the group's scrapes read them
        await services.db.close()
        await observers.close()   # the spans still queued exported

    websocket.install(app, config.service.websocket)   # open WebSockets: counted per user, closed at shutdown
    app.cleanup_ctx.append(lifecycle)
    app.cleanup_ctx.append(query.interrupts_across_replicas)
    return app
