"""Engine mode through `gateway serve`: `input_image` URLs follow the destination
policy before the upstream, which fetches them, is asked anything (engine/images.py)."""

from __future__ import annotations

import pytest

from tests.support.engine_gateway import engine_config
from tests.support.gateway_db import Counts, GatewayDb

CHAT = "/v1/chat/completions"
USER = "image-sender"


@pytest.fixture(scope="module")
def engine(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, **engine_config(chat_upstream.url))


@pytest.fixture(scope="module")
def trusting(gateway_factory, chat_upstream):
    return gateway_factory(chat_upstream.url, **engine_config(
        chat_upstream.url, client_tools={"allowed_image_destinations": ["127.0.0.0/8"]}))


def body(url: str, **extra) -> dict:
    return {"input": [{"role": "user", "content": [{"type": "input_text", "text": "What is in this image?"},
                                                   {"type": "input_image", "image_url": url}]}], **extra}


@pytest.mark.parametrize("url, why", [
    ("http://169.254.169.254/latest/meta-data/iam", "must be an https URL"),
    ("https://169.254.169.254/latest/meta-data/iam", "it is a metadata address"),
    ("https://127.0.0.1:8080/admin.png", "it is a loopback address"),
    ("https://localhost/admin.png", "it is a loopback address"),
    ("https://192.168.1.1/router.png", "it is a private address"),
    ("https://[fe80::1]/x.png", "it is a link-local address"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_a_forbidden_image_url_is_a_400_before_anything(engine, chat_upstream, url, why, stream):
    chat_upstream.clear()
    reply = engine.post(f"/v1/responses?user_id={USER}", body(url, stream=stream))
    assert reply.status == 400, reply.body
    error = reply.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "input[0].content[1].image_url"
    assert why in error["message"]
    assert chat_upstream.requests(CHAT) == []
    db = GatewayDb.of(engine)
    db.flush()
    assert db.counts(user_id=USER) == Counts(conversations=0, turns=0)


def test_data_urls_still_go_through(engine, chat_upstream):
    image = "data:image/png;base64,iVBORw0KGgo="
    assert engine.post("/v1/responses", body(image)).status == 200
    assert chat_upstream.last(CHAT)["body"]["messages"][-1]["content"][1]["image_url"]["url"] == image


def test_the_operators_exceptions_let_an_address_in(trusting, chat_upstream):
    url = "https://127.0.0.1/cat.png"
    reply = trusting.post("/v1/responses", body(url))
    assert reply.status == 200, reply.body
    assert chat_upstream.last(CHAT)["body"]["messages"][-1]["content"][1]["image_url"]["url"] == url
