"""The storage suites run on both engines (docs/architecture.md, "Storage: one API, two
engines"): every test that takes
`database_config` runs once on a SQLite file and once on a fresh PostgreSQL database."""

from __future__ import annotations

import pytest

from gateway.config.database import DatabaseConfig


@pytest.fixture(params=["sqlite", "postgres"])
def database_config(request: pytest.FixtureRequest, tmp_path) -> DatabaseConfig:
    if request.param == "sqlite":
        return DatabaseConfig.model_validate({"sqlite": {"db_path": str(tmp_path / "g.db")}})
    return DatabaseConfig.model_validate({"postgres": request.getfixturevalue("postgres").new_database()})
