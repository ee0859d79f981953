"""The aiohttp side of the WebSocket transport, its parts that decide without a socket:
what an upgrade is, which origins may open one (the CORS origins), the per-user count of
open sockets and its 429, and the turn store's 404 for an unknown previous response as
the spec's error. (Its protocol: test_ws_protocol.py; the transport through `gateway
serve`: tests/e2e/test_websocket*.py.)"""

from __future__ import annotations

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.config.websocket import WebSocketConfig
from gateway.http.websocket import OPEN_SOCKETS, _as_ws_error, _origin_allowed, install, is_upgrade
from gateway.schema.errors import ApiError, not_found


def request(**headers: str) -> web.Request:
    return make_mocked_request("GET", "/v1/responses", headers=headers)


def test_an_upgrade_is_named_in_any_case():
    assert is_upgrade(request(Upgrade="websocket")) and is_upgrade(request(Upgrade="WebSocket"))
    assert not is_upgrade(request()) and not is_upgrade(request(Upgrade="h2c"))


def test_origins_are_the_cors_ones():
    assert _origin_allowed(request(), ["https://app.example"])   # not a browser: no Origin
    assert _origin_allowed(request(Origin="https://app.example"), ["https://app.example"])
    assert _origin_allowed(request(Origin="https://any.example"), ["*"])
    assert not _origin_allowed(request(Origin="https://evil.example"), ["https://app.example"])
    assert not _origin_allowed(request(Origin="https://evil.example"), [])


def test_open_sockets_are_counted_per_user_with_their_own_429():
    app = web.Application()
    install(app, WebSocketConfig(max_connections_per_user=2))
    sockets = app[OPEN_SOCKETS].per_user
    sockets.enter("ann")
    sockets.enter("ann")
    with pytest.raises(ApiError) as refused:
        sockets.enter("ann")
    assert refused.value.status == 429 and refused.value.code == "websocket_connections_exceeded"
    assert refused.value.headers == {"Retry-After": "1"}
    sockets.enter("bo")   # another user's count is their own
    assert app.on_shutdown[-1] == app[OPEN_SOCKETS].close_all


def test_an_unknown_previous_response_is_the_specs_error():
    unknown = not_found("Response", "resp_1", code="response_not_found", param="previous_response_id")
    error = _as_ws_error(unknown, "resp_1")
    assert (error.status, error.code, error.param) == (400, "previous_response_not_found", "previous_response_id")
    assert "resp_1" in error.cause
    other = not_found("Conversation", "c", code="conversation_not_found", param="conversation")
    assert _as_ws_error(other, "resp_1") is other
    assert _as_ws_error(unknown, None) is unknown
