"""The audit writer's commits on a SQLite file made durable by syncing the log after SQLite's write lock is let go.

Why (measured, `benchmarks/RESULTS.md`, "Embedded FULL sync: the log synced outside the write lock"): with
`synchronous=FULL` SQLite syncs the WAL inside COMMIT, while it holds the database's one write lock. With two
server processes each commit then waited for the other's sync (1.5 ms of lock wait and 1.3 ms of COMMIT per
transaction on the 2-core VM), and the pair served about 0.4x the bare-FastAPI floor against 0.6x with
`synchronous=NORMAL`.

So the audit writer's own connection commits with NORMAL (SQLite writes the frames, lets the lock go, syncs
nothing), and the writer then calls `fdatasync` on the WAL file itself before any request of the batch is
answered. A sync covers every byte of the file written before it, whoever wrote it, so the batch's frames (and
the log's header) are on disk when its requests are answered, as with FULL; a crash before the sync loses only
rows whose decisions were never returned. NORMAL in WAL mode keeps the database consistent (SQLite's own
guarantee: only durability is deferred, and this module restores it), and checkpoints sync as under FULL. The
other process commits and syncs meanwhile instead of waiting. Every other connection keeps the configured FULL;
the writer's goes back to the pool at FULL.
"""

from __future__ import annotations

import os

from sqlalchemy import Connection

FULL = 2  # PRAGMA synchronous's number for FULL (EXTRA is 3: left to SQLite, as configured)


class LogSync:
    """fdatasync of one SQLite database's WAL file (reopened when the file was replaced)."""

    def __init__(self, db_path: str) -> None:
        self.db_path = db_path
        self.wal_path = db_path + "-wal"
        self._fd: int | None = None
        self.syncs = 0

    def sync(self) -> None:
        """Make everything written to the log so far durable (OSError when the disk refuses)."""
        fd = self._current_fd()
        if fd is None:  # no log: a clean close copied it into the database file, which the sync below covers
            fd = os.open(self.db_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        else:
            os.fdatasync(fd)
        self.syncs += 1

    def _current_fd(self) -> int | None:
        """A descriptor of the WAL file now at its path (None when there is none)."""
        try:
            now = os.stat(self.wal_path)
        except FileNotFoundError:
            self.close()
            return None
        if self._fd is not None:
            held = os.fstat(self._fd)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                return self._fd
            self.close()  # deleted and created again since: the old inode is not the log any more
        try:
            self._fd = os.open(self.wal_path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        return self._fd

    def close(self) -> None:
        """Let go of the descriptor."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def defer_sync(conn: Connection, db_path: str) -> LogSync | None:
    """Switch the connection from FULL to NORMAL and return the LogSync its commits need; None (nothing
    changed) when the connection does not sync at every commit as FULL."""
    raw = conn.connection.dbapi_connection
    if raw is None:
        return None
    (level,) = raw.execute("PRAGMA synchronous").fetchone()
    if level != FULL:
        return None
    raw.execute("PRAGMA synchronous=NORMAL")
    return LogSync(db_path)


def restore_sync(conn: Connection, log_sync: LogSync) -> None:
    """FULL again, before the connection goes back to the pool for other users."""
    log_sync.close()
    raw = conn.connection.dbapi_connection
    if raw is not None:
        raw.execute("PRAGMA synchronous=FULL")
