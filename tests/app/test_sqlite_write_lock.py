"""take_sqlite_write_lock: the audit transaction takes SQLite's write lock by polling, not SQLite's backoff."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import Engine

from app.db import make_engine
from app.services import audit


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    """A WAL database with one table, as the service opens it."""
    e = make_engine(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    with e.begin() as c:
        c.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    return e


def _hold(engine: Engine, hold_s: float) -> tuple[threading.Thread, list[float]]:
    """Another connection (as another process would) holding the write lock for hold_s; its release time."""
    started, released = threading.Event(), []

    def run() -> None:
        c = sqlite3.connect(str(engine.url.database), isolation_level=None)
        c.execute("BEGIN IMMEDIATE")
        started.set()
        time.sleep(hold_s)
        c.execute("COMMIT")
        released.append(time.monotonic())
        c.close()

    t = threading.Thread(target=run)
    t.start()
    started.wait(5)
    return t, released


def test_the_lock_is_taken_right_after_another_writer_lets_go(engine: Engine) -> None:
    holder, released = _hold(engine, 0.235)
    with engine.begin() as c:
        audit.take_sqlite_write_lock(c)
        acquired = time.monotonic()
        c.exec_driver_sql("INSERT INTO t VALUES (1)")
        other = sqlite3.connect(str(engine.url.database), timeout=0)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("BEGIN IMMEDIATE")  # this transaction holds the write lock
        other.close()
    holder.join()
    # SQLite's busy handler sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms: it would try again
    # at 228 and 328 ms, ~90 ms after this release; polling takes the lock within a few ms of it
    assert acquired - released[0] < 0.05
    with engine.connect() as c:
        assert c.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 1


def test_a_lock_held_past_the_connections_busy_timeout_is_an_error(engine: Engine) -> None:
    """The wait is the connection's own busy timeout (it was a fixed 30 s whatever the engine said)."""
    holder, _ = _hold(engine, 0.5)
    with engine.connect() as c:
        c.exec_driver_sql("PRAGMA busy_timeout=50")
        c.commit()
        t0 = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            audit.take_sqlite_write_lock(c)
        assert 0.05 <= time.monotonic() - t0 < 0.3
        assert c.exec_driver_sql("PRAGMA busy_timeout").scalar_one() == 50  # put back as it was
    holder.join()
