"""Every route declares its action in one table (`OPERATIONS`), shared by the code (the
middleware's check), the OpenAPI document and docs/authentication.md; a route without one stops
the gateway from starting."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiohttp import web

from gateway.app import create_app
from gateway.config import parse_config
from gateway.config.access import Action
from gateway.http.operations import (AUTHENTICATED_ONLY, OPERATIONS, RouteWithoutAction, actions_table,
                                     route_actions)

AUTHORIZATION_DOC = Path(__file__).parents[2] / "docs" / "authentication.md"


def config(**overrides):
    return parse_config({"name": "x", "llama_stack": {"url": "http://127.0.0.1:1"}, **overrides})


def test_every_served_route_has_its_action():
    app = create_app(config(service={"root_path": "/api"}))
    table = route_actions(app.router.routes(), "/api")
    assert set(table) == set(app.router.routes())  # HEAD and the /api copies included
    by_path = {(route.method, route.resource.canonical): action for route, action in table.items()}
    assert by_path["POST", "/v1/responses"] == by_path["POST", "/api/v1/responses"] == Action.RESPONSES
    assert by_path["HEAD", "/v1/models"] == by_path["GET", "/v1/models"] == Action.GET_MODELS
    assert by_path["GET", "/api/"] == Action.INFO
    assert by_path["POST", "/authorized"] == AUTHENTICATED_ONLY


def test_without_access_rules_only_lcore_open_routes_drop_their_action():
    app = create_app(config())
    strict = route_actions(app.router.routes())
    relaxed = route_actions(app.router.routes(), rules_configured=False)
    changed = {(route.method, route.resource.canonical) for route in strict if strict[route] != relaxed[route]}
    assert changed == {("PUT", "/v1/feedback/status")}
    assert {relaxed[route] for route in relaxed if (route.method, route.resource.canonical) in changed} \
        == {AUTHENTICATED_ONLY}


def test_a_route_without_an_action_is_a_start_up_error():
    app = web.Application()

    async def handler(request):
        return web.Response()

    app.router.add_get("/v1/models", handler)
    app.router.add_get("/v1/secret-admin-thing", handler)
    with pytest.raises(RouteWithoutAction, match="GET /v1/secret-admin-thing"):
        route_actions(app.router.routes())


def test_actions_are_lcore_actions_or_authenticated_only():
    assert {operation.action for operation in OPERATIONS} <= set(Action) | {AUTHENTICATED_ONLY}
    assert all(operation.action == Action.RESPONSES for operation in OPERATIONS
               if operation.path.startswith("/v1/responses"))


def test_the_docs_show_the_table():
    assert actions_table() in AUTHORIZATION_DOC.read_text()
