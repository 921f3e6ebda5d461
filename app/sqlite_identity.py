"""The SQLite file the service opened must stay the file at its path.

A database file deleted or replaced while the service ran (`rm`, a backup restored with `mv`) went unnoticed:
open connections went on reading and writing the old, unlinked file, so decisions were answered 200 with audit
rows that the file at the path never held (lost at the next restart), while new connections opened the new
file ("no such table": 500s). The engine now checks the path before every commit and, at most every 0.2 s,
before a statement; once it names another file, or none, each one fails as an outage (503 naming the cause)
until the file is put back or the service is restarted and opens the file that is there now.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy import exc as sa_exc

log = logging.getLogger("neurules.db")


class DatabaseFileChanged(sa_exc.DisconnectionError):
    """The file at the database's path is not the one the service opened (deleted, or replaced)."""


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:  # gone, or its folder can no longer be read: not the file opened either way
        return None
    return st.st_dev, st.st_ino


STATEMENT_CHECK_S = 0.2  # a statement looks at the path at most this often; every commit looks


class FileIdentity:
    """The device and inode of the database file as first opened; the checks compare the path's against them.

    Each look is a `stat` call, which lets go of the GIL: one per statement made two threads of a process
    (the audit writer and the event loop, a verifier and a writer) hand it back and forth more often, so
    statements look at most every STATEMENT_CHECK_S; a commit, which is what makes an answer's audit row
    count, always looks."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.opened: tuple[int, int] | None = None
        self.looked = -math.inf  # when the path last named the file opened (monotonic seconds)
        self.reported = False  # whether the operator's log has the current change (cleared once the file is back)

    def remember(self) -> None:
        """On each new connection: the first records the file's identity (it creates the file if there was none);
        a later one on another file (a new empty one where the file was deleted) makes the next statement look."""
        now = _identity(self.path)
        if self.opened is None:
            self.opened, self.looked = now, time.monotonic()
        elif now != self.opened:
            self.looked = -math.inf

    def check_statement(self) -> None:
        """`check_commit`, unless the path was found right within the last STATEMENT_CHECK_S."""
        if time.monotonic() - self.looked >= STATEMENT_CHECK_S:
            self.check_commit()

    def check_commit(self) -> None:
        """DatabaseFileChanged when the path names another file than the one opened, or none."""
        if self.opened is None:
            return
        now = _identity(self.path)
        if now != self.opened:  # (deleted: a new connection may already have created an empty file there)
            if not self.reported:  # the path for the operator, once; the clients' 503 names no server path
                log.error("the database file was deleted or replaced while the service ran", extra={"path": self.path})
                self.reported = True
            self.looked = -math.inf  # every statement looks again, until the file is back
            raise DatabaseFileChanged(
                "the database file was deleted or replaced while the service ran: put the file "
                "back; to restore a backup, stop the service and run neurules-admin restore <backup> (a file "
                "moved in place keeps the old -wal beside it, which SQLite would replay onto it at the next start)"
            )
        if self.reported:
            log.info("the database file is back where it was opened", extra={"path": self.path})
            self.reported = False
        self.looked = time.monotonic()


def watch(engine: Engine, path: str) -> FileIdentity:
    """Check the database file's identity before each statement and each commit on the engine's connections."""
    identity = FileIdentity(path)

    @event.listens_for(engine, "connect")
    def _remember(_dbapi_conn: Any, _record: Any) -> None:
        identity.remember()

    @event.listens_for(engine, "before_cursor_execute")
    def _before_statement(*_: Any) -> None:
        identity.check_statement()

    @event.listens_for(engine, "commit")
    def _before_commit(conn: Any) -> None:
        try:
            identity.check_commit()  # the audit writer's inserts bypass the statement events: its commit does not
        except DatabaseFileChanged:
            # refused before the driver's commit: SQLAlchemy then sees no transaction to roll back on close, and
            # the connection went back to the pool holding the write lock and the refused rows (a later commit
            # on it wrote them): end that transaction here
            conn.connection.driver_connection.rollback()
            raise

    return identity


__all__ = ["DatabaseFileChanged", "FileIdentity", "watch"]
