"""Read a running gateway's own SQLite database (read-only), to prove what a request
did or did not record there."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import yaml


def database_path(config_path: Path) -> Path:
    return Path(yaml.safe_load(config_path.read_text())["database"]["sqlite"]["db_path"])


def row_counts(config_path: Path) -> dict[str, int]:
    """Rows in the gateway's `conversations` and `turns` tables."""
    with sqlite3.connect(f"file:{database_path(config_path)}?mode=ro", uri=True) as db:
        return {table: db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
                for table in ("conversations", "turns")}
