"""SQLite's WAL checkpoints on a thread of their own, so that a request's commit does not copy the log back.

Why (measured, `benchmarks/RESULTS.md`, "c=1: the WAL checkpoint in the request"): in WAL mode SQLite checkpoints from
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
the log restarts: with one server process the log file stays at about BACKSTOP_FRAMES pages.

With several processes writing at once, a restart also needs a moment when none of them is
mid-write, and the log could grow (before this module too: tens of MB with 2 processes, over 100 MB
with 4). So when a checkpoint finds the log past `TRUNCATE_FRAMES`, the thread runs a TRUNCATE
checkpoint: it waits (at most `TRUNCATE_WAIT_MS`) for the writer and the readers of the moment,
holds new writers back meanwhile and while it copies what is left (little: the passive ones copied
the rest), and empties the file. When it has to give up (a reader holds an old snapshot), the next
try waits `TRUNCATE_RETRY_S`, so a long reader costs writers at most 0.1 s in 5 s.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time

from sqlalchemy import Connection, Engine

from app.db import sqlite_file

log = logging.getLogger("neurules.audit")

INTERVAL_S = 0.05  # at most this often while commits arrive (each checkpoint syncs two files)
BACKSTOP_FRAMES = 4000  # the writer's own automatic checkpoint (SQLite's default: 1,000): log ~16 MB at 4 KiB pages
SQLITE_DEFAULT_FRAMES = 1000  # what a connection gets back when the writer lets go of it
TRUNCATE_FRAMES = 2 * BACKSTOP_FRAMES  # a log this long was not restarted by the writers: empty it
TRUNCATE_WAIT_MS = 100  # how long a TRUNCATE waits for the writer and readers of the moment (writers wait meanwhile)
TRUNCATE_RETRY_S = 5.0  # after a TRUNCATE that had to give up (a long reader): the next try no sooner


class WalCheckpointer:
    """A daemon thread that copies a SQLite database's WAL back into the file soon after commits, off their path."""

    def __init__(self, path: str, interval_s: float = INTERVAL_S, truncate_retry_s: float = TRUNCATE_RETRY_S) -> None:
        self.path = path
        self.interval_s = interval_s
        self.truncate_retry_s = truncate_retry_s
        self._next_truncate = 0.0  # monotonic time before which no TRUNCATE is tried
        self.checkpoints = 0  # PASSIVE checkpoints that ran (not those another checkpoint kept busy)
        self.truncations = 0  # TRUNCATE checkpoints that emptied the log
        self.truncations_given_up = 0  # ... that waited TRUNCATE_WAIT_MS for a reader or writer and gave up
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the thread unless it runs already (again after `stop`)."""
        with self._lock:
            old = self._thread
            if old is not None and old.is_alive() and self._stop.is_set():
                old.join(10)  # stopped but not gone yet: let it finish before its successor starts
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="neurules-wal-checkpoint", daemon=True)
                self._thread.start()

    def alive(self) -> bool:
        """Whether the thread runs (the writer raises its own checkpoint threshold only then)."""
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def notify(self) -> None:
        """A commit happened: checkpoint within the interval."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the thread (a checkpoint in progress finishes first)."""
        self._stop.set()  # before the wake: a wake the thread clears afterwards still finds the stop
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
            with contextlib.suppress(sqlite3.Error):  # else the build's default (FULL on common builds)
                conn.execute("PRAGMA synchronous=FULL")  # a checkpoint syncs the log before and the file after
            last = 0.0
            while not self._stop.is_set():
                self._wake.wait()
                if self._stop.wait(max(0.0, last + self.interval_s - time.monotonic())):
                    return
                self._wake.clear()  # commits from here on ask for the next one
                if self._stop.is_set():
                    return
                last = time.monotonic()
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            busy, frames, _copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if busy:  # another process's checkpoint runs: it copies the same frames
                return
            self.checkpoints += 1
            if frames > TRUNCATE_FRAMES and time.monotonic() >= self._next_truncate:
                self._truncate(conn)
        except sqlite3.Error as e:  # the disk failed, or the file went: the writer's own checkpoints remain
            log.debug("wal checkpoint skipped", extra={"error": repr(e)})

    def _truncate(self, conn: sqlite3.Connection) -> None:
        self._next_truncate = time.monotonic() + self.truncate_retry_s  # given up or failed: not before this
        conn.execute(f"PRAGMA busy_timeout={TRUNCATE_WAIT_MS}")
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute("PRAGMA busy_timeout=0")
        if busy:
            self.truncations_given_up += 1
        else:
            self.truncations += 1
            self._next_truncate = 0.0


def checkpointer_for(engine: Engine) -> WalCheckpointer | None:
    """A checkpointer for the engine's database when it is a SQLite file (None for PostgreSQL or in memory)."""
    path = sqlite_file(engine)  # URI forms are left to SQLite's own checkpoints
    return None if path is None else WalCheckpointer(path)


def raise_autocheckpoint(conn: Connection) -> None:
    """Move this connection's automatic checkpoint to the backstop (the checkpointer thread does the rest)."""
    _set_autocheckpoint(conn, BACKSTOP_FRAMES)


def restore_autocheckpoint(conn: Connection) -> None:
    """SQLite's default threshold again, before the connection goes back to the pool for other users."""
    _set_autocheckpoint(conn, SQLITE_DEFAULT_FRAMES)


def _set_autocheckpoint(conn: Connection, frames: int) -> None:
    raw = conn.connection.dbapi_connection
    if raw is not None:
        raw.execute(f"PRAGMA wal_autocheckpoint={frames}")
