"""The audit writer's log synced after the write lock is let go (`app.services.wal_sync`), on real SQLite files."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from app.db import make_engine
from app.services import audit, wal_sync
from app.services.errors import Unavailable
from app.services.wal_sync import LogSync
from tests.app.test_audit_chain import plain_rows


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def _pooled_levels(engine: Engine, n: int = 3) -> list[int]:
    """PRAGMA synchronous of n pooled connections (the writer's, once given back, among them)."""
    pooled = [engine.connect() for _ in range(n)]
    try:
        return [c.exec_driver_sql("PRAGMA synchronous").scalar() for c in pooled]
    finally:
        for c in pooled:
            c.close()


def _count(path: str) -> int:
    with sqlite3.connect(path) as other:
        return int(other.execute("SELECT count(*) FROM audit_log").fetchone()[0])


def test_each_commit_is_synced_before_its_requests_are_answered(sqlite_api, monkeypatch) -> None:
    """Under FULL the writer commits with NORMAL and syncs the log itself: once per batch, on the -wal file, after
    the rows are committed (another connection sees them) and before the request waiting for them goes on."""
    engine = sqlite_api.app.state.service.db.engine
    db_path = engine.url.database
    seen: list[tuple[str, int, bool]] = []
    answered = {"n": 0}
    real = os.fdatasync

    def spy(fd: int) -> None:
        seen.append((_fd_path(fd), _count(db_path), answered["n"]))
        real(fd)

    monkeypatch.setattr(wal_sync.os, "fdatasync", spy)
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
        assert writer._conn is not None
        held_level = writer._conn.exec_driver_sql("PRAGMA synchronous").scalar()
    finally:
        writer.close()
    assert [s for one in seqs for s in one] == list(range(1, 11))
    assert held_level == 1  # NORMAL while the writer holds it
    assert [(p, n, a) for p, n, a in seen] == [(db_path + "-wal", before + 2 * (i + 1), i) for i in range(5)]
    assert _pooled_levels(engine) == [2, 2, 2]  # FULL again for everyone else


def test_normal_is_left_as_configured(tmp_path: Path, monkeypatch) -> None:
    """With synchronous=normal nothing is synced by the writer, and its connection stays NORMAL."""
    from app.tables import Base

    calls: list[int] = []
    monkeypatch.setattr(wal_sync.os, "fdatasync", calls.append)
    engine = make_engine(f"sqlite:///{tmp_path / 'n.db'}", "normal")
    Base.metadata.create_all(engine)
    writer = audit.AuditWriter(engine)
    try:
        seqs = asyncio.run(writer.write(plain_rows(3)))
        assert writer.log_sync is None
        assert writer._conn is not None and writer._conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1
    finally:
        writer.close()
        engine.dispose()
    assert seqs == [1, 2, 3] and calls == []


def test_a_failed_sync_is_a_503_and_the_connection_goes_back_at_full(sqlite_api, monkeypatch) -> None:
    """The disk refuses the sync: the request is told the audit log could not be written (never answered as if
    durable), and the connection the writer held is FULL again or gone."""
    engine = sqlite_api.app.state.service.db.engine

    def refuse(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(wal_sync.os, "fdatasync", refuse)
    writer = audit.AuditWriter(engine)
    try:
        with pytest.raises(Unavailable) as err:
            asyncio.run(writer.write(plain_rows(1, sqlite_api.tenant_a)))
        assert writer._conn is None and writer.log_sync is None
    finally:
        writer.close()
    assert err.value.dependency == "audit"
    assert _pooled_levels(engine) == [2, 2, 2]


def test_log_sync_follows_a_replaced_log_and_syncs_the_file_without_one(tmp_path: Path, monkeypatch) -> None:
    """A log deleted and created again is synced through its new file; with no log the database file is synced."""
    synced: list[str] = []
    real = os.fdatasync
    monkeypatch.setattr(wal_sync.os, "fdatasync", lambda fd: (synced.append(_fd_path(fd)), real(fd)))
    db = tmp_path / "r.db"
    db.write_bytes(b"")
    wal = tmp_path / "r.db-wal"
    wal.write_bytes(b"one")
    log = LogSync(str(db))
    try:
        log.sync()
        first = os.fstat(log._fd).st_ino  # type: ignore[arg-type]
        wal.unlink()
        keep = tmp_path / "keep"  # holds the old inode's number so the new file cannot reuse it
        keep.write_bytes(b"")
        wal.write_bytes(b"two")
        log.sync()
        assert os.fstat(log._fd).st_ino != first  # type: ignore[arg-type]
        wal.unlink()
        log.sync()
        assert log._fd is None
    finally:
        log.close()
    assert synced == [str(wal), str(wal), str(db)] and log.syncs == 3


def test_only_a_full_connection_is_switched(tmp_path: Path) -> None:
    """`defer_sync` switches FULL to NORMAL and `restore_sync` switches it back; NORMAL is left alone."""
    for level, expect in (("full", 1), ("normal", 1)):
        engine = make_engine(f"sqlite:///{tmp_path / (level + '.db')}", level)  # type: ignore[arg-type]
        try:
            with engine.connect() as conn:
                found: Any = wal_sync.defer_sync(conn, str(tmp_path / (level + ".db")))
                assert (found is not None) == (level == "full")
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == expect
                if found is not None:
                    wal_sync.restore_sync(conn, found)
                    assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2
        finally:
            engine.dispose()
