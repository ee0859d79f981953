from __future__ import annotations

import pytest

from gateway.upstream.errors import map_upstream_error, upstream_message


@pytest.mark.parametrize("body, message", [
    (b'{"detail":"Model \'x\' not found."}', "Model 'x' not found."),
    (b'{"error":{"message":"{\'errors\': []}"}}', "{'errors': []}"),
    (b'{"error":{"message":"bad","type":"invalid_request_error"}}', "bad"),
    (b'{"detail":{"response":"r","cause":"c"}}', "c"),
    (b"plain text failure", "plain text failure"),
    (b"", "no message"),
])
def test_message_from_every_shape(body, message):
    assert upstream_message(body) == message


def test_status_mapping():
    assert map_upstream_error(404, b'{"detail":"gone"}').status == 404
    assert map_upstream_error(400, b'{"detail":"bad"}').code == "upstream_bad_request"
    five = map_upstream_error(502, b'{"error":{"message":"mcp down"}}')
    assert (five.status, five.cause, five.error_type) == (500, "mcp down", "server_error")
    quota = map_upstream_error(429, b'{}', model="m")
    assert quota.status == 429 and quota.response == "The model quota has been exceeded"
    long = map_upstream_error(400, b'{"detail":"This model\'s maximum context length is 4096 tokens"}', model="m")
    assert long.status == 413 and long.cause == "The input exceeds the context window size of model 'm'."
    assert map_upstream_error(500, b'{"detail":"context_length_exceeded"}').status == 413
