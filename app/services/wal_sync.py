"""A durable SQLite commit with the log's sync after the write lock is released, not while it is held.

With `synchronous=FULL` SQLite syncs the WAL inside the commit, holding the database's single write
lock: a second server process sharing the file waits for every sync of the first. Here the audit
writer's connection commits at NORMAL (the frames written, no sync), and the writer then syncs the
log file itself before any request of the batch is answered. The commit is then durable exactly as
under FULL: its frames, commit frame included, are on disk. A frame can only have left the log
through a checkpoint, which syncs the database file before the log may be rewound. Meanwhile the
other process can already take the lock and write, and its sync may cover both.

Only where the engine was asked for FULL (`NEURULES_SQLITE_SYNCHRONOUS=full`, the default): at
NORMAL the writer leaves the log unsynced as asked.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Connection, Engine

from app.db import sqlite_file

FULL, NORMAL = 2, 1  # PRAGMA synchronous levels
_datasync = getattr(os, "fdatasync", os.fsync)  # fdatasync where the platform has it (Linux), else fsync


class LogSync:
    """Syncs one SQLite database's WAL file (and, once, its folder, so a new log's name is durable too)."""

    def __init__(self, db_path: str) -> None:
        self.wal = Path(db_path + "-wal")
        self._folder_synced = False

    def adopt(self, conn: Connection) -> bool:
        """On the writer's own connection: a FULL connection moves to NORMAL and True (call `sync` after each
        commit); False for a NORMAL one."""
        raw = conn.connection.dbapi_connection
        if raw is None or int(raw.execute("PRAGMA synchronous").fetchone()[0]) < FULL:
            return False
        raw.execute(f"PRAGMA synchronous={NORMAL}")
        return True

    def release(self, conn: Connection) -> None:
        """Back to FULL before the connection returns to the pool for other users."""
        raw = conn.connection.dbapi_connection
        if raw is not None:
            raw.execute(f"PRAGMA synchronous={FULL}")

    def sync(self) -> None:
        """Sync the log file: every commit written to it so far is on disk when this returns (OSError if not)."""
        fd = os.open(self.wal, os.O_RDONLY)
        try:
            _datasync(fd)  # the data and the size, not the times (SQLite's own sync is fdatasync too)
        finally:
            os.close(fd)
        if not self._folder_synced:
            folder = os.open(self.wal.parent, os.O_RDONLY)
            try:
                os.fsync(folder)
            finally:
                os.close(folder)
            self._folder_synced = True


def log_sync_for(engine: Engine) -> LogSync | None:
    """A LogSync for the engine's database when it is a plain SQLite file (None otherwise)."""
    path = sqlite_file(engine)
    return None if path is None else LogSync(path)
