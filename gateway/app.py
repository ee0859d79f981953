"""Wiring: build every service from the configuration, register the routes, and start
and stop them with the application."""

from __future__ import annotations

import logging
import uuid
from typing import AsyncIterator

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
from gateway.http import authorized, health, quotas, responses, root
from gateway.http.middleware import gateway_middleware
from gateway.http.openapi import route_actions
from gateway.http.services import PUBLIC, SERVICES, SKIP_WITHOUT_CREDENTIAL, Services
from gateway.identity.build import build_authenticator
from gateway.quota.service import QuotaService, open_quota
from gateway.storage.conversations import ConversationRepository
from gateway.storage.background_responses import BackgroundStore
from gateway.storage.open import open_database
from gateway.storage.engine_responses import ResponseStore
from gateway.storage.writer import TurnWriter
from gateway.tools import ConfiguredTools
from gateway.turns.forward import ForwardBackend
from gateway.turns.local import EngineBackend
from gateway.turns.prepare import BackendSelector, Preparer
from gateway.turns.run import Runner
from gateway.turns.service import TurnService
from gateway.turns.settle import Settler
from gateway.upstream.capabilities import Capabilities
from gateway.upstream.catalog import ModelCatalog
from gateway.upstream.client import UpstreamClient
from gateway.upstream.responses_api import UpstreamResponses

log = logging.getLogger("gateway")


async def build_services(config: Configuration) -> Services:
    db = await open_database(config.database)
    tools = ConfiguredTools(config)
    upstream = UpstreamClient(config.llama_stack, redact=tools.redactor.text)
    await upstream.start()
    catalog = ModelCatalog(upstream, config.llama_stack.models_cache_seconds)
    conversations = ConversationRepository(db)
    quota = await open_quota(config.quota_handlers, db, config.database)
    quota.start()
    writer = TurnWriter(conversations, quota.batch)   # the turns' charges commit with their records
    writer.start()
    capabilities = Capabilities(upstream, config.llama_stack)
    engine = LocalEngine(upstream, ResponseStore(db), config.inference,
                         [McpTools(config.mcp_servers, tools.client_mcp, mcp_limits(config.client_tools)),
                          FileSearchExecutor(upstream, config.byok_rag),
                          WebSearchExecutor(config.web_search)],
                         Moderation.of(config.guardrails, upstream),
                         images=image_policy(config.client_tools.allowed_image_destinations))
    await engine.start()
    turns = _turns(config, conversations, writer, catalog, quota, tools, settler=Settler(conversations, writer, quota),
                   forward=UpstreamResponses(upstream, capabilities), engine=engine, capabilities=capabilities)
    # Which process runs a background response (a replica of several on PostgreSQL).
    runs = BackgroundRuns(turns.runner, BackgroundStore(db), uuid.uuid4().hex)
    return Services(config=config, db=db, upstream=upstream, catalog=catalog, conversations=conversations,
                    writer=writer, turns=turns, engine=engine, quota=quota,
                    authenticator=build_authenticator(config.authentication, config.role_rules, config.access_rules),
                    background=runs)


def _turns(config: Configuration, conversations: ConversationRepository, writer: TurnWriter, catalog: ModelCatalog,
           quota: QuotaService, tools: ConfiguredTools, *, settler: Settler, forward: UpstreamResponses,
           engine: LocalEngine, capabilities: Capabilities) -> TurnService:
    """A turn's life, with both backends: the selector picks one on first use."""
    selector = BackendSelector(ForwardBackend(forward, tools, config.inference, conversations, settler),
                               EngineBackend(engine, tools, config.inference, conversations, settler), capabilities)
    preparer = Preparer(config, conversations, writer, catalog, quota, tools, settler, selector)
    return TurnService(preparer, Runner(settler, tools.labels, tools.redactor), settler, selector)


def create_app(config: Configuration) -> web.Application:
    actions: dict = {}
    app = web.Application(client_max_size=config.service.max_request_body_bytes,
                          middlewares=[gateway_middleware(config.service, config.authentication, actions)])
    prefixes = [""] + ([config.service.root_path] if config.service.root_path else [])
    for prefix in prefixes:
        responses.add_routes(app, prefix)
        catalog_routes.add_routes(app, prefix)
        health.add_routes(app, prefix)
        root.add_routes(app, prefix)
        authorized.add_routes(app, prefix)
        quotas.add_routes(app, prefix)
    actions.update(route_actions(app.router.routes(), config.service.root_path))  # a route without one: no start
    app[PUBLIC] = root.PUBLIC_HANDLERS
    app[SKIP_WITHOUT_CREDENTIAL] = health.PROBE_HANDLERS if config.authentication.skip_for_health_probes \
        else frozenset()

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        services = await build_services(config)
        app[SERVICES] = services
        watch = BackgroundWatch(services.background)
        await watch.start()  # unfinished background responses of a stopped gateway: failed
        for warning in config.warnings():
            log.warning("configuration: %s", warning)
        for warning in config.authentication.warnings():
            log.warning("security: %s", warning)
        yield
        await watch.close()
        await services.background.close()
        await services.turns.drain()
        await services.writer.close()
        await services.quota.close()
        await services.upstream.close()
        await services.engine.close()
        await services.authenticator.close()
        await services.db.close()

    app.cleanup_ctx.append(lifecycle)
    return app
