"""A durable audit commit with the log synced after SQLite's write lock is released (`app.services.wal_sync`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from app.db import make_engine
from app.services import audit, wal_sync
from app.services.errors import Unavailable
from tests.app.test_audit_chain import plain_rows


def _level(conn) -> int:
    return int(conn.exec_driver_sql("PRAGMA synchronous").scalar())


def test_adopt_moves_a_full_connection_to_normal_and_release_moves_it_back(tmp_path: Path) -> None:
    """FULL -> NORMAL with True (the caller syncs), back to FULL on release; a NORMAL connection is left alone."""
    path = tmp_path / "a.db"
    full, normal = make_engine(f"sqlite:///{path}", "full"), make_engine(f"sqlite:///{path}", "normal")
    sync = wal_sync.LogSync(str(path))
    try:
        with full.connect() as conn:
            assert _level(conn) == wal_sync.FULL
            assert sync.adopt(conn) is True and _level(conn) == wal_sync.NORMAL
            sync.release(conn)
            assert _level(conn) == wal_sync.FULL
        with normal.connect() as conn:
            assert sync.adopt(conn) is False and _level(conn) == wal_sync.NORMAL
    finally:
        full.dispose()
        normal.dispose()


def test_sync_flushes_the_log_file_and_fails_loudly_without_one(tmp_path: Path, monkeypatch) -> None:
    """`sync` fsyncs the log file (and its folder once); a missing log is an error, not a silent success."""
    path = tmp_path / "b.db"
    engine = make_engine(f"sqlite:///{path}")
    synced: list[int] = []
    real_data, real = wal_sync._datasync, os.fsync
    monkeypatch.setattr(wal_sync, "_datasync", lambda fd: (synced.append(os.fstat(fd).st_ino), real_data(fd))[1])
    monkeypatch.setattr(wal_sync.os, "fsync", lambda fd: (synced.append(os.fstat(fd).st_ino), real(fd))[1])
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE t (x)")
        sync = wal_sync.LogSync(str(path))
        sync.sync()
        sync.sync()
        log_file, folder = (tmp_path / "b.db-wal").stat().st_ino, tmp_path.stat().st_ino
        assert synced == [log_file, folder, log_file]
        with pytest.raises(FileNotFoundError):
            wal_sync.LogSync(str(tmp_path / "none.db")).sync()
    finally:
        engine.dispose()


@pytest.mark.parametrize(("level", "syncs"), [("full", True), ("normal", False)])
def test_the_audit_writer_syncs_each_batch_only_when_asked_for_full(tmp_path: Path, monkeypatch, level, syncs) -> None:
    """At FULL every batch's log is synced before its requests are answered, with the writer's connection at
    NORMAL (and FULL again in the pool after close); at NORMAL the writer syncs nothing."""
    from app.admin import create_tenant, migrate

    url = f"sqlite:///{tmp_path / 'c.db'}"
    migrate(url)
    tenant = create_tenant(url, "t")
    engine = make_engine(url, level)
    writer = audit.AuditWriter(engine)
    calls: list[int] = []
    real = wal_sync.LogSync.sync
    monkeypatch.setattr(wal_sync.LogSync, "sync", lambda self: (calls.append(1), real(self))[1])

    async def requests() -> list[list[int]]:
        return [await writer.write(plain_rows(1, tenant, tag=i)) for i in range(5)]

    try:
        seqs = asyncio.run(requests())
        assert writer._conn is not None
        held_level = _level(writer._conn)
    finally:
        writer.close()
    assert [s for one in seqs for s in one] == [1, 2, 3, 4, 5]
    assert len(calls) == (5 if syncs else 0)
    assert held_level == wal_sync.NORMAL
    with engine.connect() as conn:  # the writer's connection, back in the pool
        assert _level(conn) == (wal_sync.FULL if syncs else wal_sync.NORMAL)
    engine.dispose()


def test_a_log_that_cannot_be_synced_answers_503(tmp_path: Path, monkeypatch) -> None:
    """The batch committed but its sync failed: the requests get Unavailable, not an answer that may not survive."""
    from app.admin import create_tenant, migrate

    url = f"sqlite:///{tmp_path / 'd.db'}"
    migrate(url)
    tenant = create_tenant(url, "t")
    engine = make_engine(url)
    writer = audit.AuditWriter(engine)

    def broken(self) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(wal_sync.LogSync, "sync", broken)
    try:
        with pytest.raises(Unavailable):
            asyncio.run(writer.write(plain_rows(1, tenant)))
    finally:
        writer.close()
        engine.dispose()
