"""`GET /v1/config`'s body is the configuration as `masked()` makes it (tests/config/test_masked.py);
through `gateway serve`: tests/e2e/test_providers_and_config.py."""

from __future__ import annotations

from gateway.config import parse_config
from gateway.config.masked import MASK
from gateway.http.configuration import get_config
from gateway.http.services import SERVICES


class _Services:
    def __init__(self, config):
        self.config = config


async def test_the_body_is_the_masked_configuration():
    import orjson

    config = parse_config({"name": "g", "llama_stack": {"url": "http://u", "api_key": "upstream-secret-key"}})

    class _Request:
        app = {SERVICES: _Services(config)}

    body = orjson.loads((await get_config(_Request())).body)   # type: ignore[arg-type]
    assert body["configuration"]["name"] == "g"
    assert body["configuration"]["llama_stack"]["api_key"] == MASK
