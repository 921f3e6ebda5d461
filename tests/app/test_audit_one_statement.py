"""The one-statement audit batch on PostgreSQL: the same rows, seqs and hashes as the Python chain, and safe retries."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.services import audit, audit_one_statement, audit_verify
from app.services.audit_chain import START, link_rows
from tests.app.test_audit_chain import plain_rows
from tests.app.test_audit_heads_pg import wait_blocked_or_done

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(pg_engine: Engine) -> Engine:
    """The service's kind of engine on the session's PostgreSQL database (tests/conftest.py)."""
    return pg_engine


def tenant() -> str:
    """A tenant id unique to this test (the session database is shared)."""
    return f"tn_one_{uuid.uuid4().hex[:8]}"


def odd_rows(n: int, t: str, request: int) -> list[dict[str, Any]]:
    """One request's rows as the service builds them (`audit.audit_rows`): one time for the whole request, and
    the request's first record sent twice; with text that needs escaping in JSON, arrays and SQL."""
    out = plain_rows(n, t, tag=request)
    when = out[0]["created_at"] + timedelta(seconds=request)
    for i, r in enumerate(out):
        r["created_at"] = when
        r["model_version_id"] = 'mv_"q\\{x},é' + str(i % 2)
        r["output"] = {"prediction": 'a\\b"c\n{}', "probabilities": {'a\\b"c\n{}': 0.25, "ü": 0.75}}
        r["missing_filled"] = None if i % 3 == 0 else bool(i % 2)
    if n > 1:
        out[1]["input_digest"] = out[0]["input_digest"]
    return out


def one_statement_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the batches (their sizes) that go by the one statement."""
    calls: list[int] = []
    real = audit_one_statement.append

    def counted(raw: Any, columns: dict[str, list[Any]], bound: dict[str, list[Any]]) -> list[int] | None:
        calls.append(len(columns["tenant_id"]))
        return real(raw, columns, bound)

    monkeypatch.setattr(audit_one_statement, "append", counted)
    return calls


def write(engine: Engine, batches: list[list[dict[str, Any]]]) -> list[list[int]]:
    """Each batch through the group-commit writer, one after another (each its own transaction)."""
    writer = audit.AuditWriter(engine)

    async def go() -> list[list[int]]:
        return [await writer.write(b) for b in batches]

    try:
        return asyncio.run(go())
    finally:
        writer.close()


def stored(engine: Engine, t: str) -> list[dict[str, Any]]:
    """The tenant's rows as stored, in seq order."""
    with Session(engine) as s:
        return [
            dict(r)
            for r in s.execute(text("SELECT * FROM audit_log WHERE tenant_id = :t ORDER BY seq"), {"t": t}).mappings()
        ]


def assert_intact(engine: Engine, t: str, n: int) -> None:
    """The tenant's chain verifies (every hash recomputed in Python) and holds n rows."""
    with Session(engine) as s:
        report = audit_verify.verify_tenant(s, t)
    assert report.intact and report.rows_checked == n, report


def test_hashes_computed_in_sql_equal_the_python_chain(engine, monkeypatch) -> None:
    """Rows written in one statement carry the seqs and hashes `link_rows` gives the same rows in Python."""
    t = tenant()
    calls = one_statement_calls(monkeypatch)
    batches = [odd_rows(1, t, 1), odd_rows(5, t, 2), odd_rows(audit_one_statement.MAX_ROWS, t, 3)]
    seqs = write(engine, batches)
    assert calls == [1, 5, audit_one_statement.MAX_ROWS]
    assert seqs == [[1], [2, 3, 4, 5, 6], list(range(7, 7 + audit_one_statement.MAX_ROWS))]
    expected = [dict(r) for b in batches for r in b]
    link_rows(expected, START)
    got = stored(engine, t)
    assert [r["row_hash"] for r in got] == [r["row_hash"] for r in expected]
    assert [r["prev_hash"] for r in got] == [r["prev_hash"] for r in expected]
    assert got[0]["output"] == expected[0]["output"] and got[0]["model_version_id"] == expected[0]["model_version_id"]
    assert [r["missing_filled"] for r in got] == [r["missing_filled"] for r in expected]
    assert_intact(engine, t, len(expected))


def test_larger_and_mixed_batches_take_the_transactional_path_on_the_same_chain(engine, monkeypatch) -> None:
    """A batch over MAX_ROWS, or of two tenants, goes the old way; the chains still link across both paths."""
    t, u = tenant(), tenant()
    calls = one_statement_calls(monkeypatch)
    mixed = [*odd_rows(2, t, 4), *odd_rows(2, u, 5)]
    write(engine, [odd_rows(3, t, 6), odd_rows(audit_one_statement.MAX_ROWS + 1, t, 7), mixed, odd_rows(1, u, 8)])
    assert calls == [3, 1]  # the first and the last batch
    assert_intact(engine, t, 3 + audit_one_statement.MAX_ROWS + 1 + 2)
    assert_intact(engine, u, 3)


def test_a_connection_killed_between_batches_is_replaced_and_nothing_is_written_twice(engine, monkeypatch) -> None:
    """The kept connection dies while idle: the statement fails, the rows are looked for, then written once."""
    t = tenant()
    writer = audit.AuditWriter(engine)
    looked: list[list[int] | None] = []
    real = audit_one_statement.committed_seqs
    monkeypatch.setattr(audit_one_statement, "committed_seqs", lambda *a: looked.append(real(*a)) or looked[-1])

    async def go() -> list[list[int]]:
        first = await writer.write(odd_rows(2, t, 9))
        assert writer._conn is not None
        pid = writer._conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
        writer._conn.rollback()
        with engine.connect() as admin:
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            admin.commit()
        return [first, await writer.write(odd_rows(3, t, 10))]

    try:
        assert asyncio.run(go()) == [[1, 2], [3, 4, 5]]
    finally:
        writer.close()
    assert looked == [None]  # the statement broke, its rows were looked for and not found, then written
    assert_intact(engine, t, 5)


def test_a_naive_time_is_bound_as_utc_as_on_the_transactional_path(engine) -> None:
    """A time without zone is stored as UTC (the column's bind processor), whatever the session's TimeZone."""
    t = tenant()
    rows = odd_rows(3, t, 11)
    for r in rows:
        r["created_at"] = r["created_at"].replace(tzinfo=None)
    with engine.connect() as conn:
        conn.exec_driver_sql("SET TIME ZONE 'Europe/Berlin'")
        conn.commit()
        audit.prepare_heads(conn, rows)
        assert audit._one_statement(conn, rows) == [1, 2, 3]
        conn.exec_driver_sql("RESET TIME ZONE")
        conn.commit()
    assert_intact(engine, t, 3)


def test_committed_rows_are_found_when_a_request_repeats_a_record(engine) -> None:
    """`committed_seqs` finds a committed batch whose first rows share time and digest; nothing for one not written."""
    t = tenant()
    rows = odd_rows(4, t, 12)
    write(engine, [odd_rows(1, t, 13), rows])
    columns = {name: [r[name] for r in rows] for name in rows[0]}
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert audit_one_statement.committed_seqs(raw, columns, rows[0]["created_at"]) == [2, 3, 4, 5]
        other = {**columns, "input_digest": ["f" * 64] * 4}
        assert audit_one_statement.committed_seqs(raw, other, rows[0]["created_at"]) is None


def test_a_reply_lost_after_the_commit_is_not_written_again(engine, monkeypatch) -> None:
    """The statement commits, then the connection breaks before its answer arrives: the rows are found, once."""
    t = tenant()
    real = audit_one_statement.append
    broken: list[bool] = []

    def commit_then_break(raw: Any, columns: dict[str, list[Any]], bound: dict[str, list[Any]]) -> list[int] | None:
        out = real(raw, columns, bound)
        if not broken:
            broken.append(True)
            raw.pgconn.finish()  # the socket goes; the rows are committed
            raise psycopg.OperationalError("the connection was lost")
        return out

    monkeypatch.setattr(audit_one_statement, "append", commit_then_break)
    assert write(engine, [odd_rows(1, t, 14), odd_rows(3, t, 15)]) == [[1], [2, 3, 4]]
    assert broken and len(stored(engine, t)) == 4
    assert_intact(engine, t, 4)


def test_a_statement_still_waiting_on_the_server_is_ended_before_the_rows_are_looked_for(engine) -> None:
    """The client side of the connection breaks while its statement waits for the head's lock on the server: that
    server process is ended (it would commit later), then the rows are looked for and written once."""
    t = tenant()
    write(engine, [odd_rows(1, t, 16)])
    writer = audit.AuditWriter(engine)
    result: list[Any] = []
    with engine.connect() as holder:
        holder.execute(text("SELECT seq FROM audit_chain_heads WHERE tenant_id = :t FOR UPDATE"), {"t": t})
        thread = threading.Thread(target=lambda: result.append(asyncio.run(writer.write(odd_rows(2, t, 17)))))
        thread.start()
        wait_blocked_or_done(engine, thread)
        assert thread.is_alive() and writer._conn is not None
        raw = writer._conn.connection.dbapi_connection
        socket.socket(fileno=os.dup(raw.fileno())).shutdown(socket.SHUT_RDWR)  # the client side only
        time.sleep(0.5)  # the writer ends that process, finds nothing, and waits for the lock again
        holder.rollback()
        thread.join(10)
    writer.close()
    assert result == [[2, 3]]
    assert len(stored(engine, t)) == 3
    assert_intact(engine, t, 3)
