"""The one-statement audit batch on PostgreSQL: the same rows, seqs and hashes as the Python chain, and safe retries."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.services import audit, audit_one_statement, audit_verify
from app.services.audit_chain import START, link_rows
from tests.app.test_audit_chain import plain_rows

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(pg_engine: Engine) -> Engine:
    """The service's kind of engine on the session's PostgreSQL database (tests/conftest.py)."""
    return pg_engine


def tenant() -> str:
    """A tenant id unique to this test (the session database is shared)."""
    return f"tn_one_{uuid.uuid4().hex[:8]}"


def odd_rows(n: int, t: str, request: int) -> list[dict[str, Any]]:
    """One request's rows, with text that needs escaping in JSON, arrays and SQL (quotes, backslashes, non-ASCII).

    Each request has its own time, as in the service (`audit.audit_rows`).
    """
    out = plain_rows(n, t, tag=request)
    for i, r in enumerate(out):
        r["created_at"] += timedelta(seconds=request)
        r["model_version_id"] = 'mv_"q\\{x},é' + str(i % 2)
        r["output"] = {"prediction": 'a\\b"c\n{}', "probabilities": {'a\\b"c\n{}': 0.25, "ü": 0.75}}
        r["missing_filled"] = None if i % 3 == 0 else bool(i % 2)
    return out


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


def test_hashes_computed_in_sql_equal_the_python_chain(engine) -> None:
    """Rows written in one statement carry the seqs and hashes `link_rows` gives the same rows in Python."""
    t = tenant()
    batches = [odd_rows(1, t, 1), odd_rows(5, t, 2), odd_rows(audit_one_statement.MAX_ROWS, t, 3)]
    seqs = write(engine, batches)
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
    taken: list[bool] = []
    real = audit_one_statement.append
    monkeypatch.setattr(audit_one_statement, "append", lambda *a: taken.append(True) or real(*a))
    mixed = [*odd_rows(2, t, 4), *odd_rows(2, u, 5)]
    write(engine, [odd_rows(3, t, 6), odd_rows(audit_one_statement.MAX_ROWS + 1, t, 7), mixed, odd_rows(1, u, 8)])
    assert taken == [True, True]  # the first and the last batch
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


def test_committed_rows_are_found_after_a_broken_connection(engine) -> None:
    """`committed_seqs` finds a batch the statement committed, and nothing for one it did not."""
    t = tenant()
    rows = odd_rows(4, t, 11)
    write(engine, [odd_rows(1, t, 12), rows])
    columns = {name: [r[name] for r in rows] for name in rows[0]}
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert audit_one_statement.committed_seqs(raw, columns) == [2, 3, 4, 5]
        other = {**columns, "input_digest": ["f" * 64] * 4}
        assert audit_one_statement.committed_seqs(raw, other) is None
