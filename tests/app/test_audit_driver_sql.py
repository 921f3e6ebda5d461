"""`audit.run_driver_sql`: SQLite statements on the driver's own cursor, errors as SQLAlchemy raises them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.orm import Session

from app.db import is_unavailable_error, make_engine
from app.services import audit
from app.tables import AuditChainHead, AuditRecord, Base
from tests.app.test_audit_chain import plain_rows


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    eng = make_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with eng.begin() as c:
        c.exec_driver_sql("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
    return eng


def test_one_set_many_sets_and_rows(engine: Engine) -> None:
    """One parameter set runs once, several run as executemany, and a query's rows come back as tuples."""
    with engine.begin() as c:
        assert audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "a")]) == []
        assert audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(2, "b"), (3, "c")]) == []
        assert audit.run_driver_sql(c, "SELECT k, v FROM t WHERE k >= ? ORDER BY k", [(2,)]) == [(2, "b"), (3, "c")]
    with engine.connect() as c:  # committed with the caller's transaction
        assert c.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 3


def test_inside_a_transaction_sqlalchemy_executes_nothing(engine: Engine) -> None:
    """In a transaction the statements skip SQLAlchemy's execution (no cursor event); outside one they do not."""
    seen: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *a: seen.append(a[2]))
    with engine.begin() as c:
        audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "a")])
    assert seen == []
    with engine.connect() as c:
        audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(2, "b")])
        c.commit()
    assert seen == ["INSERT INTO t VALUES (?, ?)"]


def test_rolled_back_with_the_callers_transaction(engine: Engine) -> None:
    """The driver's statements are part of the SQLAlchemy transaction: its rollback takes them back."""
    with engine.connect() as c:
        trans = c.begin()
        audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "a")])
        trans.rollback()
        assert c.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 0


def test_outside_a_transaction_sqlalchemy_begins_it(engine: Engine) -> None:
    """Called before any transaction: SQLAlchemy's autobegin sees the statement, so commit() commits it."""
    with engine.connect() as c:
        assert not c.in_transaction()
        audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "a")])
        assert c.in_transaction()
        c.commit()
    with engine.connect() as c:
        assert c.exec_driver_sql("SELECT count(*) FROM t").scalar_one() == 1


def test_a_constraint_error_is_sqlalchemys_integrity_error(engine: Engine) -> None:
    """The same exception class `exec_driver_sql` raises, with the driver's error as `orig` (not a 503)."""
    with engine.begin() as c:
        audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "a")])
    with engine.begin() as c, pytest.raises(sa_exc.IntegrityError) as caught:
        audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "again")])
    assert isinstance(caught.value.orig, sqlite3.IntegrityError)
    assert caught.value.statement == "INSERT INTO t VALUES (?, ?)"
    assert not is_unavailable_error(caught.value)


def test_a_locked_database_is_an_outage(engine: Engine, tmp_path: Path) -> None:
    """Another process's write lock past the busy timeout: OperationalError "database is locked", judged a 503."""
    other = sqlite3.connect(tmp_path / "a.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with engine.connect() as c:
            c.exec_driver_sql("PRAGMA busy_timeout=0")  # and SQLAlchemy's transaction is open
            with pytest.raises(sa_exc.OperationalError) as caught:
                audit.run_driver_sql(c, "INSERT INTO t VALUES (?, ?)", [(1, "a")])
        assert is_unavailable_error(caught.value)
    finally:
        other.execute("ROLLBACK")
        other.close()


def test_a_closed_connection_fails_as_in_sqlalchemy(tmp_path: Path) -> None:
    """A closed connection is not used behind SQLAlchemy's back: the call fails in `exec_driver_sql`."""
    eng = create_engine(f"sqlite:///{tmp_path / 'b.db'}")
    c = eng.connect()
    c.close()
    with pytest.raises(sa_exc.ResourceClosedError):
        audit.run_driver_sql(c, "SELECT 1", [()])


def test_audit_rows_written_by_the_driver_read_back_through_sqlalchemy(engine: Engine) -> None:
    """Rows and head written through the driver hold what SQLAlchemy's own types read back (times, JSON, booleans)."""
    Base.metadata.create_all(engine)
    rows = plain_rows(3)
    seqs = audit.write_rows(engine, rows)
    assert seqs == [1, 2, 3]
    with Session(engine) as s:
        stored = s.query(AuditRecord).order_by(AuditRecord.seq).all()
        head = s.get(AuditChainHead, "tn_a")
    assert [r.output for r in stored] == [r["output"] for r in rows]
    assert [r.created_at.replace(tzinfo=None) for r in stored] == [r["created_at"].replace(tzinfo=None) for r in rows]
    assert [r.missing_filled for r in stored] == [r["missing_filled"] for r in rows]
    assert head is not None and head.seq == 3 and head.row_hash == stored[-1].row_hash
