"""The `database` section: LCORE's keys, SQLite (the embedded default) or PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from gateway.config.base import Strict

# libpq's sslmode values, which LCORE passes through to its driver.
SslMode = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]


class SQLiteConfig(Strict):
    db_path: str = "/tmp/lightspeed-stack.db"


class PostgresConfig(Strict):
    """LCORE's `PostgreSQLDatabaseConfiguration`, with its defaults."""

    host: str = "localhost"
    port: int = Field(5432, gt=0, lt=65536)
    db: str = Field(min_length=1)
    user: str = Field(min_length=1)
    password: SecretStr   # never in a repr, a log line or an error message
    namespace: str = Field("public", min_length=1)  # the schema; created if absent
    ssl_mode: SslMode = "prefer"
    gss_encmode: Literal["disable", "prefer", "require"] = "prefer"
    ca_cert_path: Path | None = None

    @field_validator("gss_encmode")
    @classmethod
    def _no_gss_transport(cls, value: str) -> str:
        # asyncpg speaks TLS but not GSSAPI transport encryption: `prefer` falls back to
        # a plain or TLS connection as libpq does when GSS is unavailable; `require`
        # cannot be honoured, and connecting anyway would drop what it asks for.
        if value == "require":
            raise ValueError("'require' is not supported: the gateway's PostgreSQL driver (asyncpg) cannot "
                             "encrypt with GSSAPI; use ssl_mode (TLS) with gss_encmode 'prefer' or 'disable'")
        return value

    @field_validator("ca_cert_path")
    @classmethod
    def _readable(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"no such file: {value}")
        return value


class DatabaseConfig(Strict):
    sqlite: SQLiteConfig | None = None
    postgres: PostgresConfig | None = None

    @model_validator(mode="after")
    def _one_engine(self) -> "DatabaseConfig":
        if self.sqlite and self.postgres:
            raise ValueError("configure exactly one of sqlite and postgres")
        return self

    @property
    def sqlite_path(self) -> str:
        return (self.sqlite or SQLiteConfig()).db_path
