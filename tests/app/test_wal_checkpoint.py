"""SQLite's WAL copied back by a thread of its own (`app.services.wal_checkpoint`), on real database files."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from app.services import audit, wal_checkpoint
from app.services.wal_checkpoint import WalCheckpointer, checkpointer_for
from tests.app.test_audit_chain import plain_rows

BLOB = 3000  # bytes per row: about one page each, so the log grows by whole frames


def _wal_db(path: Path, autocheckpoint: int) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA wal_autocheckpoint={autocheckpoint}")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, b BLOB)")
    return conn


def _commits(conn: sqlite3.Connection, n: int, after: WalCheckpointer | None = None) -> None:
    for _ in range(n):
        conn.execute("INSERT INTO t (b) VALUES (randomblob(?))", (BLOB,))
        if after is not None:
            after.notify()


def _until(condition, timeout: float = 10.0) -> bool:
    """Poll `condition` until it holds or `timeout` passes (a loaded CI machine may delay the thread)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.parametrize("running", [True, False])
def test_commits_are_copied_into_the_file_off_the_writers_path(tmp_path: Path, running: bool) -> None:
    """With the thread the database file takes every row while the writer never checkpoints; without it, none."""
    path = tmp_path / "a.db"
    conn = _wal_db(path, autocheckpoint=0)  # the writer never checkpoints itself
    start_size = path.stat().st_size
    every_row = start_size + 200 * 4096  # one page per row at least
    ck = WalCheckpointer(str(path), interval_s=0.01)
    if running:
        ck.start()
    try:
        _commits(conn, 200, after=ck)
        if running:
            assert _until(lambda: path.stat().st_size >= every_row), path.stat().st_size
    finally:
        ck.stop()
    if running:
        assert ck.checkpoints >= 1
    else:
        time.sleep(0.1)
        assert ck.checkpoints == 0 and path.stat().st_size == start_size  # still only in the log
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 200
    conn.close()


def test_the_log_stays_bounded_under_steady_commits(tmp_path: Path) -> None:
    """Commits that never pause: the writer's backstop restarts the log, so it does not grow with the commits.

    Past the backstop the writer checkpoints after every commit until one finds the checkpoint lock free
    (the thread holds it while it runs): the log overshoots the backstop, by 200-700 frames on a quiet 2-core
    machine and by up to ~2,000 during a full test run on a slow one, but does not grow with the number of
    commits. Without the backstop the log reached 4,632 frames on one VM (the thread's checkpoints let some
    writers restart it), and without the thread too, one frame a commit; the bound is that: fewer frames than
    commits. (It was half the commits, which an Intel VM of 2026-11-29 exceeded in 1 run of 6 alone and in a full
    CI run: 5,437 and 6,244 frames, the checkpoint thread losing the lock race more often there.)
    """
    path = tmp_path / "b.db"
    backstop, commits = 200, 8000  # each commit adds at least one frame
    conn = _wal_db(path, autocheckpoint=backstop)
    ck = WalCheckpointer(str(path), interval_s=0.005)
    ck.start()
    try:
        _commits(conn, commits, after=ck)
    finally:
        ck.stop()
    frames = ((tmp_path / "b.db-wal").stat().st_size - 32) // (4096 + 24)
    assert frames < commits  # the log's high-water mark (the file never shrinks): one frame a commit without both
    assert ck.checkpoints >= 1
    conn.close()


def test_a_long_reader_holds_writers_back_only_now_and_then(tmp_path: Path, monkeypatch) -> None:
    """While a reader keeps an old snapshot, a TRUNCATE (which holds writers back as it waits) gives up after
    its short wait and is not tried again before the retry delay, however often commits arrive."""
    monkeypatch.setattr(wal_checkpoint, "TRUNCATE_FRAMES", 50)
    path = tmp_path / "f.db"
    conn = _wal_db(path, autocheckpoint=0)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()
    ck = WalCheckpointer(str(path), interval_s=0.005, truncate_retry_s=0.5)
    ck.start()
    try:
        _commits(conn, 100, after=ck)  # past TRUNCATE_FRAMES
        deadline = time.monotonic() + 1.2
        while time.monotonic() < deadline:  # commits keep asking for checkpoints
            _commits(conn, 1, after=ck)
            time.sleep(0.01)
    finally:
        ck.stop()
        reader.close()
    assert 1 <= ck.truncations_given_up <= 4  # every 0.5 s at most; without the delay: about every 0.1 s
    assert ck.truncations == 0
    conn.close()


def test_stop_ends_the_thread_and_start_runs_it_again(tmp_path: Path) -> None:
    """`stop` joins the thread; `start` after it checkpoints again (the writer is restartable too)."""
    path = tmp_path / "c.db"
    conn = _wal_db(path, autocheckpoint=0)
    ck = WalCheckpointer(str(path), interval_s=0.01)
    for _ in range(2):
        before = ck.checkpoints
        ck.start()
        _commits(conn, 5, after=ck)
        assert _until(lambda before=before: ck.checkpoints > before)
        ck.stop()
        assert ck.checkpoints > before
        assert ck._thread is not None and not ck._thread.is_alive()
    conn.close()


def test_a_database_it_cannot_open_leaves_the_writer_alone(tmp_path: Path) -> None:
    """A path that cannot be opened: the thread ends quietly, notify and stop still return."""
    ck = WalCheckpointer(str(tmp_path / "missing" / "x.db"), interval_s=0.01)
    ck.start()
    ck.notify()
    ck.stop()
    assert ck.checkpoints == 0


def test_only_sqlite_files_get_one(tmp_path: Path) -> None:
    """PostgreSQL and in-memory SQLite have no checkpointer; a SQLite file has one, at its path."""
    assert checkpointer_for(create_engine("postgresql+psycopg://u@127.0.0.1/x")) is None
    assert checkpointer_for(create_engine("sqlite://")) is None
    assert checkpointer_for(create_engine("sqlite:///:memory:")) is None
    ck = checkpointer_for(create_engine(f"sqlite:///{tmp_path / 'd.db'}"))
    assert ck is not None and ck.path == str(tmp_path / "d.db")


def test_the_audit_writer_checkpoints_its_commits_and_stops_the_thread(sqlite_api) -> None:
    """The audit writer on SQLite: its connection's threshold raised while it holds it (and only then), its commits
    checkpointed, the thread stopped by `close`."""
    engine = sqlite_api.app.state.service.db.engine
    writer = audit.AuditWriter(engine)
    assert writer.checkpointer is not None

    async def requests() -> list[list[int]]:
        return [await writer.write(plain_rows(1, sqlite_api.tenant_a, tag=i)) for i in range(20)]

    try:
        seqs = asyncio.run(requests())
        assert _until(lambda: writer.checkpointer.checkpoints >= 1)
        assert writer._conn is not None
        level = writer._conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar()
    finally:
        writer.close()
    assert [s for one in seqs for s in one] == list(range(1, 21))
    assert level == wal_checkpoint.BACKSTOP_FRAMES
    assert writer.checkpointer._thread is not None and not writer.checkpointer._thread.is_alive()
    pooled = [engine.connect() for _ in range(3)]  # the writer's connection is among them, back in the pool
    try:
        assert [c.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() for c in pooled] == [1000] * 3
    finally:
        for c in pooled:
            c.close()


def test_a_log_the_writers_never_restart_is_emptied(tmp_path: Path, monkeypatch) -> None:
    """A long log (a reader held an old snapshot): the TRUNCATE gives up while the reader is there, and
    empties the file once it is gone (the checkpoint step itself, run here without the thread)."""
    monkeypatch.setattr(wal_checkpoint, "TRUNCATE_FRAMES", 300)
    path = tmp_path / "e.db"
    conn = _wal_db(path, autocheckpoint=0)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM t").fetchone()  # a snapshot: no checkpoint may pass it
    _commits(conn, 400)
    wal = tmp_path / "e.db-wal"
    ck = WalCheckpointer(str(path), truncate_retry_s=0.0)
    probe = sqlite3.connect(path, isolation_level=None)
    try:
        ck._checkpoint(probe)
        assert (ck.truncations, ck.truncations_given_up) == (0, 1)
        assert wal.stat().st_size > 300 * 4096
        reader.execute("COMMIT")
        ck._checkpoint(probe)
        assert (ck.truncations, ck.truncations_given_up) == (1, 1)
        assert wal.stat().st_size == 0
    finally:
        probe.close()
        reader.close()
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 400  # every row kept, in the file now
    conn.close()


@pytest.mark.parametrize(("env", "level"), [(None, 2), ("normal", 1), ("full", 2), ("NORMAL", 1)])
def test_sqlite_commits_are_synced_unless_told_otherwise(tmp_path: Path, monkeypatch, env, level) -> None:
    """The service's SQLite connections sync the log at every commit (FULL = 2) by default; `normal` (1) on request."""
    from app.settings import Settings
    from worker.service import build_service

    monkeypatch.delenv("NEURULES_DATABASE_URL", raising=False)
    monkeypatch.delenv("NEURULES_SQLITE_SYNCHRONOUS", raising=False)
    if env is not None:
        monkeypatch.setenv("NEURULES_SQLITE_SYNCHRONOUS", env)
    app = build_service(Settings(data_dir=tmp_path, embedded_worker=False), configure_logs=False)
    engine = app.state.service.db.engine
    try:
        with engine.connect() as conn:
            assert conn.execute(text("PRAGMA synchronous")).scalar() == level
    finally:
        engine.dispose()


def test_an_unknown_synchronous_level_names_the_variable(monkeypatch) -> None:
    """`NEURULES_SQLITE_SYNCHRONOUS=off` fails at start-up, naming the variable."""
    from worker.cli import main

    monkeypatch.setenv("NEURULES_SQLITE_SYNCHRONOUS", "off")
    with pytest.raises(SystemExit) as e:
        main(["config"])
    assert "NEURULES_SQLITE_SYNCHRONOUS: Input should be 'full' or 'normal'" in str(e.value), str(e.value)
