"""The storage factory: the configured engine, connected and migrated.

Apart from `database.py` (the interface both engines implement), so the interface does
not import its implementations."""

from __future__ import annotations

from gateway.config.database import DatabaseConfig
from gateway.storage.database import Database


async def open_database(config: DatabaseConfig) -> Database:
    """The configured engine, connected and migrated (each engine imported only when
    chosen: asyncpg is not loaded for SQLite). A SQLite file is claimed for this process
    (`sharing.py`): shared by workers, refused when another process holds it."""
    if config.postgres is not None:
        from gateway.storage.postgres import PostgresDatabase

        return await PostgresDatabase.open(config.postgres)
    from gateway.storage.sqlite import SQLiteDatabase

    return await SQLiteDatabase.open(config.sqlite_path, claim=True)
