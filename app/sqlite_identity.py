"""The SQLite file the service opened must stay the file at its path.

A database file deleted or replaced while the service ran (`rm`, a backup restored with `mv`) went unnoticed:
open connections went on reading and writing the old, unlinked file, so decisions were answered 200 with audit
rows that the file at the path never held (lost at the next restart), while new connections opened the new
file ("no such table": 500s). The engine now checks the path before every statement and every commit; once it
names another file, or none, each one fails as an outage (503 naming the cause) until the service is restarted
and opens the file that is there now.
"""

from __future__ import annotations

import os
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc


class DatabaseFileChanged(sa_exc.DisconnectionError):
    """The file at the database's path is not the one the service opened (deleted, or replaced)."""


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class FileIdentity:
    """The device and inode of the database file as first opened; `check` compares the path's against them."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opened: tuple[int, int] | None = None

    def remember(self) -> None:
        """Record the file's identity, once (the first connection creates the file if it did not exist)."""
        if self.opened is None:
            self.opened = _identity(self.path)

    def check(self) -> None:
        """DatabaseFileChanged when the path names another file than the one opened, or none."""
        if self.opened is None:
            return
        now = _identity(self.path)
        if now != self.opened:  # (deleted: a new connection may already have created an empty file there)
            raise DatabaseFileChanged(
                f"the database file {self.path} was deleted or replaced while the service ran: put the file "
                "back, or restart the service to open the one there now"
            )


def watch(engine: Engine, path: str) -> FileIdentity:
    """Check the database file's identity before each statement and each commit on the engine's connections."""
    identity = FileIdentity(path)

    @event.listens_for(engine, "connect")
    def _remember(_dbapi_conn: Any, _record: Any) -> None:
        identity.remember()

    @event.listens_for(engine, "before_cursor_execute")
    def _before_statement(*_: Any) -> None:
        identity.check()

    @event.listens_for(engine, "commit")
    def _before_commit(_conn: Any) -> None:
        identity.check()  # the audit writer's inserts bypass the statement events: its commit does not

    return identity


__all__ = ["DatabaseFileChanged", "FileIdentity", "watch"]
