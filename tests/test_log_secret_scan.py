"""The session-end scan of the gateways' logs (tests/conftest.py) finds what it must:
the credentials clients sent, as the recording relay extracts them, and configured
secrets, anywhere in a log."""

from __future__ import annotations

import json
from types import SimpleNamespace

import yaml

from tests.support.gateway_proc import Gateway
from tests.support.recording_proxy import credentials_in


def test_the_relay_extracts_every_kind_of_credential():
    head = (b"POST /v1/responses HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer tok-12345678\r\n"
            b"x-rh-identity: eyJpZGVudGl0eSI6e319\r\nMCP-HEADERS: "
            + json.dumps({"calc": {"X-Api-Key": "mcp-key-987654"}}).encode() + b"\r\n\r\n{\"input\": \"hi\"}")
    found = credentials_in(head)
    assert {"Bearer tok-12345678", "tok-12345678", "eyJpZGVudGl0eSI6e319", "mcp-key-987654"} <= found
    assert not any("input" in value for value in found)


def test_a_credential_in_the_log_is_found(tmp_path):
    config = tmp_path / "lightspeed-stack.yaml"
    config.write_text(yaml.safe_dump({"llama_stack": {"url": "http://u", "api_key": "upstream-key-42"}}))
    log = tmp_path / "gateway.log"
    credentials = tmp_path / "client-credentials.txt"
    credentials.write_text("tok-12345678\nshort\n")
    gateway = Gateway.__new__(Gateway)
    gateway.proc, gateway.config_path, gateway.credentials = SimpleNamespace(log_path=log), config, credentials
    log.write_text('{"type": "access", "user": "ab12"}\n')
    assert gateway.logged_secrets() == set()
    log.write_text("INFO something tok-12345678 upstream-key-42 short\n")
    assert gateway.logged_secrets() == {"tok-12345678", "upstream-key-42"}   # "short": not a secret
