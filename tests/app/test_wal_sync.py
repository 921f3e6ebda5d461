"""The audit writer's log synced after the write lock is let go (`app.services.wal_sync`), on real SQLite files."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine

from app.db import make_engine
from app.services import audit, wal_sync
from app.services.errors import Unavailable
from app.services.wal_sync import LogSync, SyncFailed
from app.tables import Base
from tests.app.test_audit_chain import plain_rows


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture(autouse=True)
def _no_failed_logs(monkeypatch) -> None:
    """Each test starts with no log whose sync failed (that record is process-wide)."""
    monkeypatch.setattr(wal_sync, "_failed", {})


def _raw(writer: audit.AuditWriter) -> sqlite3.Connection:
    """The driver connection the writer holds (checked after it let go of it)."""
    assert writer._conn is not None
    raw = writer._conn.connection.dbapi_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def _full_or_closed(raw: sqlite3.Connection) -> bool:
    """A connection the writer let go of is FULL again (pooled for others) or closed (thrown away), never NORMAL."""
    try:
        return raw.execute("PRAGMA synchronous").fetchone()[0] == 2
    except sqlite3.ProgrammingError:  # closed
        return True


def _count(path: str) -> int:
    with sqlite3.connect(path) as other:
        return int(other.execute("SELECT count(*) FROM audit_log").fetchone()[0])


def _engine(path: Path, level: str = "full") -> Engine:
    engine = make_engine(f"sqlite:///{path}", level)  # type: ignore[arg-type]
    Base.metadata.create_all(engine)
    return engine


def test_each_commit_is_synced_before_its_requests_are_answered(sqlite_api, monkeypatch) -> None:
    """Under FULL the writer commits with NORMAL and syncs the log itself: once per batch, on the -wal file, after
    the rows are committed (another connection sees them) and before the request waiting for them goes on."""
    engine = sqlite_api.app.state.service.db.engine
    db_path = engine.url.database
    seen: list[tuple[str, int, int]] = []
    answered = {"n": 0}
    real = os.fdatasync

    def spy(fd: int) -> None:
        seen.append((_fd_path(fd), _count(db_path), answered["n"]))
        real(fd)

    monkeypatch.setattr(wal_sync, "_fdatasync", spy)
    writer = audit.AuditWriter(engine)

    async def requests() -> list[list[int]]:
        out = []
        for i in range(5):
            out.append(await writer.write(plain_rows(2, sqlite_api.tenant_a, tag=i)))
            answered["n"] += 1
        return out

    try:
        before = _count(db_path)
        seqs = asyncio.run(requests())
        raw = _raw(writer)
        held_level = raw.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        writer.close()
    assert [s for one in seqs for s in one] == list(range(1, 11))
    assert held_level == 1  # NORMAL while the writer holds it
    wal = os.path.realpath(db_path) + "-wal"
    assert seen == [(wal, before + 2 * (i + 1), i) for i in range(5)]
    assert raw.execute("PRAGMA synchronous").fetchone()[0] == 2  # back in the pool, FULL again for everyone else


def test_the_log_synced_is_the_one_sqlite_writes_through_a_symbolic_link(tmp_path: Path, monkeypatch) -> None:
    """A database path through a symbolic link: SQLite puts the -wal beside the real file, and that is what is
    synced (a sync of `<link>-wal`, which does not exist, had been no sync of the log at all)."""
    synced: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(wal_sync, "_fdatasync", lambda fd: (synced.append(_fd_path(fd)), real(fd)))
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    _engine(tmp_path / "real" / "s.db").dispose()
    (tmp_path / "links" / "s.db").symlink_to(tmp_path / "real" / "s.db")
    engine = make_engine(f"sqlite:///{tmp_path / 'links' / 's.db'}")
    writer = audit.AuditWriter(engine)
    try:
        asyncio.run(writer.write(plain_rows(2)))
    finally:
        writer.close()
        engine.dispose()
    assert synced == [str(tmp_path / "real" / "s.db-wal")]


def test_normal_is_left_as_configured(tmp_path: Path, monkeypatch) -> None:
    """With synchronous=normal nothing is synced by the writer, and its connection stays NORMAL."""
    calls: list[int] = []
    monkeypatch.setattr(wal_sync, "_fdatasync", calls.append)
    engine = _engine(tmp_path / "n.db", "normal")
    writer = audit.AuditWriter(engine)
    try:
        seqs = asyncio.run(writer.write(plain_rows(3)))
        assert writer.log_sync is None
        assert writer._conn is not None and writer._conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
    finally:
        writer.close()
        engine.dispose()
    assert seqs == [1, 2, 3] and calls == []


def test_a_failed_sync_is_final_until_a_restart(sqlite_api, monkeypatch) -> None:
    """The disk refuses a sync: that request gets a 503 naming it (never an answer as if durable), and so does
    every later one, with nothing more written, even once syncs work again (the kernel may have dropped the
    failed pages; later frames would be lost with them). The connection goes back at FULL."""
    engine = sqlite_api.app.state.service.db.engine
    db_path = engine.url.database

    def refuse(fd: int) -> None:
        raise OSError(5, "Input/output error")

    writer = audit.AuditWriter(engine)
    try:
        asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a)))  # a good batch first: the connection is held
        raw = _raw(writer)
        monkeypatch.setattr(wal_sync, "_fdatasync", refuse)
        with pytest.raises(Unavailable) as first:
            asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a, tag=1)))
        after_first = _count(db_path)
        monkeypatch.setattr(wal_sync, "_fdatasync", os.fdatasync)
        with pytest.raises(Unavailable) as later:
            asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a, tag=2)))
        with pytest.raises(Unavailable) as batch:  # predict.csv's path, on pooled FULL connections
            audit.write_rows_or_unavailable(engine, plain_rows(3, sqlite_api.tenant_a, tag=3))
        assert _count(db_path) == after_first  # nothing written after the failure
    finally:
        writer.close()
    for err in (first.value, later.value, batch.value):
        assert err.dependency == "audit" and "Input/output error" in err.message and "restart the" in err.message
    assert _full_or_closed(raw)


def test_readiness_reports_a_failed_sync(sqlite_api, monkeypatch) -> None:
    """After a failed sync /readyz is 503 naming the audit check and what to do (a load balancer takes the process
    out) and so is the liveness probe /healthz (an orchestrator restarts it: nothing else recovers it)."""
    assert sqlite_api.client.get("/readyz").json()["checks"]["audit"] == "ok"
    assert sqlite_api.client.get("/healthz").json() == {"status": "ok"}
    writer = sqlite_api.app.state.service.audit

    def refuse(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wal_sync, "_fdatasync", refuse)
    with pytest.raises(Unavailable):
        asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a)))
    monkeypatch.setattr(wal_sync, "_fdatasync", os.fdatasync)
    ready = sqlite_api.client.get("/readyz")
    assert ready.status_code == 503, ready.text
    check = ready.json()["checks"]["audit"]
    assert check.startswith("error: SyncFailed") and "No space left" in check and "restart the service" in check
    alive = sqlite_api.client.get("/healthz")
    assert alive.status_code == 503 and alive.json() == {"status": "failed", "checks": {"audit": check}}
    folder = str(Path(writer.engine.url.database or "").resolve().parent)
    assert folder not in ready.text and folder not in alive.text  # the server's paths stay in its log


def test_a_connection_that_cannot_be_set_back_to_full_never_returns_to_the_pool(sqlite_api, monkeypatch) -> None:
    """Setting FULL again fails (as it does inside a transaction): the connection is thrown away, not pooled at
    NORMAL for the rest of the service."""
    engine = sqlite_api.app.state.service.db.engine

    def fails(conn) -> None:
        raise sqlite3.OperationalError("Safety level may not be changed inside a transaction")

    writer = audit.AuditWriter(engine)
    try:
        asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a)))
        raw = _raw(writer)
        monkeypatch.setattr(wal_sync, "restore_sync", fails)
    finally:
        writer.close()
    with pytest.raises(sqlite3.ProgrammingError):  # it could not be set back: thrown away (closed) ...
        raw.execute("PRAGMA synchronous")
    pooled = [engine.connect() for _ in range(5)]
    try:  # ... and not among the pool's connections
        assert all(c.connection.dbapi_connection is not raw for c in pooled)
    finally:
        for c in pooled:
            c.close()


def test_close_leaves_a_writer_still_writing_its_connection(sqlite_api, monkeypatch) -> None:
    """`close` gives up waiting while the writer is inside a sync: it must not take the connection (or the log's
    descriptor) from under it, so the batch is still synced before it is answered."""
    engine = sqlite_api.app.state.service.db.engine
    entered, release = threading.Event(), threading.Event()
    synced: list[int] = []
    real = os.fdatasync

    def slow(fd: int) -> None:
        entered.set()
        release.wait(10)
        real(fd)
        synced.append(fd)

    monkeypatch.setattr(wal_sync, "_fdatasync", slow)
    monkeypatch.setattr(audit.AuditWriter, "CLOSE_WAIT_S", 0.2)
    writer = audit.AuditWriter(engine)
    result: list[object] = []

    def request() -> None:
        try:
            result.append(asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a))))
        except Exception as e:  # recorded for the assertion
            result.append(e)

    client = threading.Thread(target=request)
    client.start()
    assert entered.wait(10)
    writer.close()  # waits 0.2 s, then leaves the writer alone
    assert writer._conn is not None and writer.log_sync is not None and writer.log_sync._fd is not None
    release.set()
    client.join(10)
    assert not client.is_alive()
    assert result == [[1]] and len(synced) == 1
    assert writer._thread is not None
    writer._thread.join(10)  # it had its sentinel: it gives its own connection back
    assert not writer._thread.is_alive() and writer._conn is None and writer.log_sync._fd is None


def test_log_sync_follows_a_replaced_log_and_fails_without_one(tmp_path: Path, monkeypatch) -> None:
    """A log deleted and created again is synced through its new file; a log gone is a failed sync, for good."""
    synced: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(wal_sync, "_fdatasync", lambda fd: (synced.append(_fd_path(fd)), real(fd)))
    wal = tmp_path / "r.db-wal"
    wal.write_bytes(b"one")
    log = LogSync(str(wal))
    try:
        log.sync()
        first = os.fstat(log._fd).st_ino  # type: ignore[arg-type]
        wal.unlink()
        wal.write_bytes(b"two")
        log.sync()
        assert os.fstat(log._fd).st_ino != first  # type: ignore[arg-type]
        wal.unlink()
        with pytest.raises(SyncFailed):
            log.sync()
        wal.write_bytes(b"three")
        with pytest.raises(SyncFailed):
            log.sync()
    finally:
        log.close()
    assert synced == [str(wal), str(wal)] and log.syncs == 2


def test_only_a_full_connection_in_wal_mode_is_switched(tmp_path: Path) -> None:
    """`defer_sync` switches FULL to NORMAL (returning the log's path) and `restore_sync` switches it back;
    NORMAL, and a connection not in WAL mode, are left alone."""
    for level in ("full", "normal"):
        engine = make_engine(f"sqlite:///{tmp_path / (level + '.db')}", level)  # type: ignore[arg-type]
        try:
            with engine.connect() as conn:
                wal = wal_sync.defer_sync(conn)
                assert wal == (str(tmp_path / "full.db-wal") if level == "full" else None)
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
                if wal is not None:
                    wal_sync.restore_sync(conn)
                    assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
                conn.exec_driver_sql("PRAGMA journal_mode=DELETE")
                conn.exec_driver_sql("PRAGMA synchronous=FULL")
                assert wal_sync.defer_sync(conn) is None
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
        finally:
            engine.dispose()
