"""The PostgreSQL engine's pure parts: the portable SQL's parameters as asyncpg's `$n`,
row counts from command tags, libpq's sslmode as asyncpg takes it."""

from __future__ import annotations

import ssl

import pytest

from gateway.config.database import PostgresConfig
from gateway.storage.postgres import _rowcount, _ssl, _statement, quote_identifier
from tests.support.auth_peers import TestCa


@pytest.mark.parametrize("sql, params, expected", [
    ("SELECT a FROM t WHERE id = :id", {"id": 1}, ("SELECT a FROM t WHERE id = $1", [1])),
    ("UPDATE t SET a = :a WHERE b = :b AND c = :a", {"b": 2, "a": 1}, ("UPDATE t SET a = $1 WHERE b = $2 AND c = $1",
                                                                       [1, 2])),
    ("INSERT INTO t VALUES (?, ?), (?, ?)", [1, 2, 3, 4], ("INSERT INTO t VALUES ($1, $2), ($3, $4)", [1, 2, 3, 4])),
    ("SELECT x::text FROM t WHERE y = :y", {"y": "v"}, ("SELECT x::text FROM t WHERE y = $1", ["v"])),
    ("SELECT 1", (), ("SELECT 1", [])),
])
def test_parameters_are_numbered(sql, params, expected):
    assert _statement(sql, params) == expected


def test_row_counts_and_identifiers():
    assert [_rowcount(tag) for tag in ("UPDATE 3", "INSERT 0 1", "DELETE 0", "SELECT 2", "BEGIN")] == [3, 1, 0, 2, 0]
    assert quote_identifier("lightspeed-stack") == '"lightspeed-stack"'
    assert quote_identifier('a"b') == '"a""b"'


def test_ssl_modes(tmp_path):
    ca = TestCa(tmp_path)
    assert _ssl(_config(ssl_mode="prefer")) == "prefer"
    assert _ssl(_config(ssl_mode="verify-full")) == "verify-full"  # the system's roots
    assert _ssl(_config(ssl_mode="disable", ca_cert_path=str(ca.ca_path))) == "disable"
    for mode, check_hostname in (("require", False), ("verify-ca", False), ("verify-full", True)):
        context = _ssl(_config(ssl_mode=mode, ca_cert_path=str(ca.ca_path)))
        assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
        assert context.check_hostname is check_hostname


def _config(**keys) -> PostgresConfig:
    return PostgresConfig.model_validate({"db": "d", "user": "u", "password": "p", **keys})
