"""SQLite WAL checkpoints for the audit writer, run by a thread of their own instead of inside its commits.

SQLite checkpoints automatically in the commit that takes the WAL past 1,000 pages: that commit
copies the WAL into the database and syncs both files (~5 ms here), and with one-row audit
transactions every few hundredth request waited for it (the p99 at c=1). The audit writer's own
connection raises that threshold to a backstop (so the WAL stays bounded should this thread fall
behind) and this thread runs a PASSIVE checkpoint (it waits for no reader or writer) a short
while after commits, on a connection of the pool. Durability is unchanged: with
synchronous=NORMAL a WAL commit is not synced either way; the checkpoint does what SQLite would.
"""

from __future__ import annotations

import contextlib
import logging
import threading

from sqlalchemy import Connection, Engine

log = logging.getLogger("neurules.audit")

CHECKPOINT_DELAY_S = 0.1  # after a commit, the next checkpoint within this long (the WAL holds ~0.1 s of writes)
BACKSTOP_PAGES = 20_000  # the writer's connection checkpoints by itself beyond this many WAL pages (~80 MB)


def uses_wal_file(engine: Engine) -> bool:
    """Whether the engine is a file SQLite database (WAL mode, where checkpoints apply)."""
    return engine.dialect.name == "sqlite" and engine.url.database not in (None, "", ":memory:")


class Checkpointer:
    """A daemon thread running PASSIVE checkpoints shortly after the commits it is told of."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def adopt(self, conn: Connection) -> None:
        """Raise the connection's automatic checkpoint threshold to the backstop (the writer's connection)."""
        raw = conn.connection.dbapi_connection
        if raw is None:
            return
        info = conn.connection.info
        if "wal_autocheckpoint" not in info:
            info["wal_autocheckpoint"] = int(raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
        raw.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")

    def release(self, conn: Connection) -> None:
        """Give the connection its own threshold back before it returns to the pool (discarded if that fails)."""
        info = conn.connection.info
        before = info.pop("wal_autocheckpoint", None)
        if before is None:
            return
        try:
            conn.connection.dbapi_connection.execute(f"PRAGMA wal_autocheckpoint={int(before)}")  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 -- a broken connection: not pooled again with the backstop
            with contextlib.suppress(Exception):
                conn.invalidate()

    def committed(self) -> None:
        """Note a commit: a checkpoint follows within CHECKPOINT_DELAY_S."""
        if not self._dirty.is_set():
            self._dirty.set()
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if (self._thread is None or not self._thread.is_alive()) and not self._stop.is_set():
                    self._thread = threading.Thread(target=self._run, name="neurules-audit-checkpoint", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait()
            if self._stop.wait(CHECKPOINT_DELAY_S):
                return
            self._dirty.clear()
            self.checkpoint()

    def checkpoint(self) -> None:
        """One PASSIVE checkpoint on a pooled connection; a failure is logged (the backstop still bounds the WAL)."""
        try:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").close()
        except Exception as e:  # noqa: BLE001 -- the database is away: the writer reports that to its requests
            log.warning("audit WAL checkpoint failed", extra={"error": repr(e)})

    def close(self) -> None:
        """Stop the thread (a pending checkpoint is left to SQLite)."""
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(5)
