"""The audit writer's commits on a SQLite file made durable by syncing the log after SQLite's write lock is let go.

Why (measured, `benchmarks/RESULTS.md`, "Embedded FULL sync: the log synced outside the write lock"): with
`synchronous=FULL` SQLite syncs the WAL inside COMMIT, while it holds the database's one write lock, so with two
server processes each commit waited for the other's sync.

So the audit writer's own connection commits with NORMAL: SQLite appends the frames and lets the lock go without
syncing them (it still syncs the log's header when it restarts the log, before the first frame, as under FULL).
The writer then calls `fdatasync` on the WAL file itself before any request of the batch is answered. A sync
covers every byte of the file written before it, whoever wrote it, so the batch's frames are on disk when its
requests are answered. A crash before the sync loses only rows whose decisions were never returned; in
between, other connections can already read them (under FULL they could not): `GET /v1/audit` or monitoring may
list a row that such a crash then loses, with its decision never answered. NORMAL
in WAL mode keeps the database consistent (SQLite's own guarantee: only durability is deferred, and this module
restores it), and checkpoints sync as under FULL. SQLite's FULL pads a commit to a sector boundary only on a
build without POWERSAFE_OVERWRITE (the default is on); such a build is not supported here.

A failed sync is final for the process (`SyncFailed`): the kernel may have dropped the pages it could not write
and report the next sync as a success, and the WAL's checksums chain from frame to frame, so later frames would
be lost with the failed ones. Every later audit write of the process is refused (503), the CSV batch path's
too (`refuse_if_failed`), and /readyz says so, until the service is restarted, which recovers the database from
what is on disk. Other writes (registry, jobs) still go into the same log until then.
"""

from __future__ import annotations

import contextlib
import logging
import os

from sqlalchemy import Connection

log = logging.getLogger("neurules.audit")

FULL = 2  # PRAGMA synchronous's number for FULL (EXTRA is 3: left to SQLite, as configured)
_fdatasync = getattr(os, "fdatasync", os.fsync)  # (macOS has no fdatasync)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class SyncFailed(OSError):
    """The audit log could not be made durable; nothing more is written until the service restarts."""


_failed: dict[str, str] = {}  # WAL path -> why a sync of it failed: final for the process, whichever path writes


def _refusal(wal_path: str) -> SyncFailed:
    return SyncFailed(  # no path: this message reaches clients (a 503) and /healthz; the log names the file
        f"a sync of the audit log failed ({_failed[wal_path]}): restart the service; no decision is audited until then"
    )


def refuse_if_failed(conn: Connection) -> None:
    """SyncFailed when a sync of this SQLite connection's log failed earlier in this process (the CSV batch path,
    which commits on pooled FULL connections, must stop too: its frames would follow the lost ones)."""
    if not _failed or conn.dialect.name != "sqlite":
        return
    wal = wal_path_of(conn)
    if wal is not None and wal in _failed:
        raise _refusal(wal)


def wal_path_of(conn: Connection) -> str | None:
    """The WAL file of a SQLite connection's main database, where SQLite keeps it (symbolic links resolved)."""
    raw = conn.connection.dbapi_connection
    if raw is None:
        return None
    files = {name: file for _, name, file in raw.execute("PRAGMA database_list").fetchall()}
    return f"{files['main']}-wal" if files.get("main") else None


class LogSync:
    """fdatasync of one SQLite database's WAL file (reopened when the file was replaced); failures are final."""

    def __init__(self, wal_path: str) -> None:
        self.wal_path = wal_path
        self._fd: int | None = None
        self.syncs = 0

    def check(self) -> None:
        """SyncFailed when an earlier sync failed."""
        if self.wal_path in _failed:
            raise _refusal(self.wal_path)

    def open(self) -> None:
        """Open the descriptor now, before the connection's first commit: an error of the file's writeback is then
        reported to it (Linux reports one to a descriptor opened after another descriptor saw it as nothing)."""
        with contextlib.suppress(FileNotFoundError):  # no log yet: opened at the first sync
            self._current_fd()

    def sync(self) -> None:
        """Make everything written to the log so far durable; SyncFailed when it cannot be (then and from then on)."""
        self.check()
        try:
            _fdatasync(self._current_fd())
        except OSError as e:
            _failed[self.wal_path] = f"{e.__class__.__name__}: {e}"
            self.close()
            log.critical("audit log sync failed", extra={"path": self.wal_path, "error": _failed[self.wal_path]})
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
    wal = wal_path_of(conn)
    if raw is None or wal is None:
        return None
    (mode,) = raw.execute("PRAGMA journal_mode").fetchone()
    (level,) = raw.execute("PRAGMA synchronous").fetchone()
    if str(mode).lower() != "wal" or level != FULL:
        return None
    raw.execute("PRAGMA synchronous=NORMAL")
    return wal


def restore_sync(conn: Connection) -> None:
    """FULL again, before the connection goes back to the pool for other users (fails inside a transaction)."""
    raw = conn.connection.dbapi_connection
    if raw is not None:
        raw.execute("PRAGMA synchronous=FULL")
