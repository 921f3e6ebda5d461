"""SQLite's WAL checkpoints on a thread of their own, so that a request's commit does not copy the log back.

Why (measured, `benchmarks/RESULTS.md`, "c=1: the WAL checkpoint"): in WAL mode SQLite checkpoints from
the connection whose commit takes the log past 1,000 frames. The audit writer's commit that crossed it
copied those frames into the database file and synced both files: 4-6 ms on the 2-core VM, against
0.25 ms for a plain commit. That hit every ~200th one-record request at c=1, and at c=32 every request
of the group waiting on that commit.

Here a thread with a connection of its own runs PASSIVE checkpoints, at most once per `interval_s` and
only while commits arrive. A PASSIVE checkpoint never waits for writers or readers, and it runs in
SQLite's C code without the GIL. So the log is mostly copied back before a writer's checkpoint comes
due.

The writer's own checkpoint still has a job: restarting the log. SQLite rewinds the log only when a
write transaction begins with every frame copied back, and under steady writes a concurrent checkpoint
almost never leaves that state behind. So the writer's connection keeps SQLite's automatic checkpoint
at `BACKSTOP_FRAMES`. When it comes due, nearly everything has been copied already, so it is short, and
the log restarts: the log file stays bounded at about BACKSTOP_FRAMES pages.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

from sqlalchemy import Connection, Engine

log = logging.getLogger("neurules.audit")

INTERVAL_S = 0.05  # at most this often while commits arrive (each checkpoint syncs two files)
BACKSTOP_FRAMES = 4000  # the writer's own automatic checkpoint (SQLite's default: 1,000): log <= ~16 MB at 4 KiB pages


class WalCheckpointer:
    """A daemon thread that copies a SQLite database's WAL back into the file soon after commits, off their path."""

    def __init__(self, path: str, interval_s: float = INTERVAL_S) -> None:
        self.path = path
        self.interval_s = interval_s
        self.checkpoints = 0  # PASSIVE checkpoints run (for tests and probes)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the thread unless it runs already (again after `stop`)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="neurules-wal-checkpoint", daemon=True)
                self._thread.start()

    def notify(self) -> None:
        """A commit happened: checkpoint within the interval."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread (a checkpoint in progress finishes first)."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None:
            thread.join(10)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=0)
        except sqlite3.Error as e:  # the writer's own checkpoints remain
            log.warning("wal checkpointer not started", extra={"error": repr(e)})
            return
        try:
            last = 0.0
            while True:
                self._wake.wait()
                if self._stop.wait(max(0.0, last + self.interval_s - time.monotonic())):
                    return
                self._wake.clear()  # commits from here on ask for the next one
                last = time.monotonic()
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            self.checkpoints += 1
        except sqlite3.Error as e:  # another process checkpoints, or the disk failed: the writer's backstop remains
            log.debug("wal checkpoint skipped", extra={"error": repr(e)})


def checkpointer_for(engine: Engine) -> WalCheckpointer | None:
    """A checkpointer for the engine's database when it is a SQLite file (None for PostgreSQL or in memory)."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    if url.database.startswith("file:") or url.query:  # URI forms: leave them to SQLite's own checkpoints
        return None
    return WalCheckpointer(url.database)


def raise_autocheckpoint(conn: Connection) -> None:
    """Move this connection's automatic checkpoint to the backstop (the checkpointer thread does the rest)."""
    raw = conn.connection.dbapi_connection
    if raw is not None:
        raw.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_FRAMES}")
