"""The SQLite file the service opened must stay the file at its path (`app.sqlite_identity`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.db import is_unavailable_error, make_engine, outage_cause
from app.sqlite_identity import DatabaseFileChanged


def _engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = make_engine(f"sqlite:///{tmp_path / 'db.sqlite3'}")
    with engine.begin() as c:
        c.exec_driver_sql("CREATE TABLE t (x INTEGER)")
    return engine


def _replace(path: Path) -> None:
    copy = path.with_name("copy.sqlite3")
    shutil.copy(path, copy)
    copy.replace(path)


def test_a_commit_of_rows_written_on_the_drivers_cursor_is_refused_after_a_replace(tmp_path: Path) -> None:
    """The audit writer inserts on the driver's cursor (no statement event): its commit is checked, so rows
    written into the unlinked file are never reported committed."""
    engine = _engine(tmp_path)
    conn = engine.connect()
    trans = conn.begin()
    conn.connection.driver_connection.execute("INSERT INTO t VALUES (1)")  # type: ignore[union-attr]
    _replace(tmp_path / "db.sqlite3")
    with pytest.raises(DatabaseFileChanged) as caught:
        trans.commit()
    assert is_unavailable_error(caught.value) and "deleted or replaced" in (outage_cause(caught.value) or "")
    conn.close()
    with pytest.raises(DatabaseFileChanged), engine.connect() as c:
        c.exec_driver_sql("SELECT count(*) FROM t").scalar()


def test_a_file_moved_away_and_back_is_the_same_file(tmp_path: Path) -> None:
    """The check is on the file (device and inode), not on its name: put back, it is used again."""
    engine = _engine(tmp_path)
    path = tmp_path / "db.sqlite3"
    aside = tmp_path / "aside.sqlite3"
    path.rename(aside)
    with pytest.raises(DatabaseFileChanged), engine.begin() as c:
        c.exec_driver_sql("INSERT INTO t VALUES (2)")
    aside.rename(path)
    with engine.begin() as c:
        c.exec_driver_sql("INSERT INTO t VALUES (3)")
    with engine.connect() as c:
        assert c.exec_driver_sql("SELECT x FROM t").scalars().all() == [3]


def test_a_refused_commit_leaves_no_transaction_in_the_pool(tmp_path: Path) -> None:
    """A reviewer: refused before the driver's commit, the transaction stayed open on the pooled connection,
    holding SQLite's write lock (another process: "database is locked") and the refused rows, which the next
    commit on that connection wrote once the file was put back. The refusal rolls it back."""
    import sqlite3

    engine = _engine(tmp_path)
    path, aside = tmp_path / "db.sqlite3", tmp_path / "aside.sqlite3"
    conn = engine.connect()
    trans = conn.begin()
    conn.connection.driver_connection.execute("INSERT INTO t VALUES (1)")  # type: ignore[union-attr]
    path.rename(aside)
    with pytest.raises(DatabaseFileChanged):
        trans.commit()
    conn.close()
    aside.rename(path)  # put back, as the 503 advises
    other = sqlite3.connect(path, timeout=0.5)  # another process: not locked out
    other.execute("INSERT INTO t VALUES (2)")
    other.commit()
    other.close()
    with engine.begin() as c:  # the next commit on the pool's connection
        c.exec_driver_sql("INSERT INTO t VALUES (3)")
    with engine.connect() as c:
        assert sorted(c.exec_driver_sql("SELECT x FROM t").scalars().all()) == [2, 3]
