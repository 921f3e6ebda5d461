"""The audit writer's commits on a SQLite file made durable by syncing the log after SQLite's write lock is let go.

Why (measured, `benchmarks/RESULTS.md`, "Embedded FULL sync: the log synced outside the write lock"): with
`synchronous=FULL` SQLite syncs the WAL inside COMMIT, while it holds the database's one write lock, so with two
server processes each commit waited for the other's sync.

So the audit writer's own connection commits with NORMAL: SQLite appends the frames and lets the lock go without
syncing them (it still syncs the log's header when it restarts the log, before the first frame, as under FULL).
The writer then calls `fdatasync` on the WAL file itself before any request of the batch is answered. A sync
covers every byte of the file written before it, whoever wrote it, so the batch's frames are on disk when its
requests are answered. A crash before the sync loses only rows whose decisions were never returned; in
between, other connections can already read them (under FULL they could not), which changes no answer. NORMAL
in WAL mode keeps the database consistent (SQLite's own guarantee: only durability is deferred, and this module
restores it), and checkpoints sync as under FULL. SQLite's FULL pads a commit to a sector boundary only on a
build without POWERSAFE_OVERWRITE (the default is on); such a build is not supported here.

A failed sync is final for the process (`SyncFailed`): the kernel may have dropped the pages it could not write
and report the next sync as a success, and the WAL's checksums chain from frame to frame, so later frames would
be lost with the failed ones. Every later audit write is refused (503) until the service is restarted, which
recovers the database from what is on disk.
"""

from __future__ import annotations

import logging
import os

from sqlalchemy import Connection

log = logging.getLogger("neurules.audit")

FULL = 2  # PRAGMA synchronous's number for FULL (EXTRA is 3: left to SQLite, as configured)
_fdatasync = getattr(os, "fdatasync", os.fsync)  # (macOS has no fdatasync)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class SyncFailed(OSError):
    """The audit log could not be made durable; nothing more is written until the service restarts."""


class LogSync:
    """fdatasync of one SQLite database's WAL file (reopened when the file was replaced); failures are final."""

    def __init__(self, wal_path: str) -> None:
        self.wal_path = wal_path
        self._fd: int | None = None
        self.syncs = 0
        self.failed: str | None = None  # why the first failed sync failed

    def check(self) -> None:
        """SyncFailed when an earlier sync failed."""
        if self.failed is not None:
            raise SyncFailed(
                f"a sync of the audit log failed ({self.failed}): restart the service; no decision is audited until "
                f"then (log {self.wal_path})"
            )

    def sync(self) -> None:
        """Make everything written to the log so far durable; SyncFailed when it cannot be (then and from then on)."""
        self.check()
        try:
            _fdatasync(self._current_fd())
        except OSError as e:
            self.failed = f"{e.__class__.__name__}: {e}"
            self.close()
            log.critical("audit log sync failed", extra={"path": self.wal_path, "error": self.failed})
            self.check()
        self.syncs += 1

    def _current_fd(self) -> int:
        """A descriptor of the WAL file now at its path (FileNotFoundError: none, which a connection in WAL mode
        that has just committed never leaves: the file was deleted underneath)."""
        now = os.stat(self.wal_path)
        if self._fd is not None:
            held = os.fstat(self._fd)
            if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
                return self._fd
            self.close()  # deleted and created again since: the old inode is not the log any more
        self._fd = os.open(self.wal_path, os.O_RDONLY | _CLOEXEC)
        return self._fd

    def close(self) -> None:
        """Let go of the descriptor."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def defer_sync(conn: Connection) -> str | None:
    """Switch a connection in WAL mode from FULL to NORMAL and return the path of the WAL file its commits go to
    (where SQLite opened it: symbolic links resolved); None (nothing changed) for any other connection."""
    raw = conn.connection.dbapi_connection
    if raw is None:
        return None
    (mode,) = raw.execute("PRAGMA journal_mode").fetchone()
    (level,) = raw.execute("PRAGMA synchronous").fetchone()
    files = {name: file for _, name, file in raw.execute("PRAGMA database_list").fetchall()}
    if str(mode).lower() != "wal" or level != FULL or not files.get("main"):
        return None
    raw.execute("PRAGMA synchronous=NORMAL")
    return f"{files['main']}-wal"


def restore_sync(conn: Connection) -> None:
    """FULL again, before the connection goes back to the pool for other users (fails inside a transaction)."""
    raw = conn.connection.dbapi_connection
    if raw is not None:
        raw.execute("PRAGMA synchronous=FULL")
