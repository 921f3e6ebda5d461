"""Chain heads on PostgreSQL: a tenant's first batch, written alongside other tenants' batches, never deadlocks."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from app.services import audit, audit_verify
from tests.app.test_audit_chain import plain_rows

pytestmark = pytest.mark.integration


@pytest.fixture
def engine(pg_engine: Engine) -> Engine:
    """The service's kind of engine on the session's PostgreSQL database (tests/conftest.py)."""
    return pg_engine


def names(*parts: str) -> list[str]:
    """Tenant ids unique to this test (the session database is shared), sorted as `parts` are."""
    tag = uuid.uuid4().hex[:8]
    return [f"{p}_{tag}" for p in parts]


def mixed(tenants: list[str], tag: int) -> list[dict[str, Any]]:
    """Two rows for each tenant, interleaved (one batch of the group-commit writer)."""
    per = [plain_rows(2, t, tag=tag) for t in tenants]
    return [r for pair in zip(*per, strict=True) for r in pair]


def assert_intact(engine: Engine, tenants: list[str], rows_each: int) -> None:
    """Every tenant has its head and a chain of `rows_each` rows that verifies."""
    with engine.connect() as c:
        q = text("SELECT tenant_id FROM audit_chain_heads WHERE tenant_id = ANY(:t)")
        heads = set(c.scalars(q, {"t": tenants}))
    assert heads == set(tenants)
    with Session(engine) as s:
        for t in tenants:
            report = audit_verify.verify_tenant(s, t)
            assert report.intact and report.rows_checked == rows_each, (t, report)


def wait_blocked_or_done(engine: Engine, thread: threading.Thread, timeout: float = 5.0) -> None:
    """Until `thread` has finished or a backend of this database waits on a lock."""
    deadline = time.monotonic() + timeout
    with engine.connect() as c:
        while thread.is_alive() and time.monotonic() < deadline:
            waiting = c.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
            if waiting:
                return
            c.rollback()
            time.sleep(0.01)


def test_first_write_of_a_tenant_does_not_deadlock(engine, monkeypatch) -> None:
    """The interleaving that deadlocked: a batch locks an existing head, then meets a new one created meanwhile.

    Batch 1 writes tenants (new, old): before the fix it locked `old`, then created `new`. While it
    does, another process creates `new` and a third batch for (new, old) locks `new` first (sorted)
    and waits for `old`; batch 1 then waited for `new`: a cycle, one batch aborted by PostgreSQL.
    Now missing heads are created, committed, before any head is locked.
    """
    new, old = names("a_new", "b_old")
    audit.write_rows(engine, plain_rows(2, old, tag=1))
    create = audit._create_heads
    errors: list[BaseException] = []
    fired = threading.Event()

    def third() -> None:
        try:
            audit.write_rows(engine, mixed([new, old], tag=3))
        except BaseException as e:  # reported below
            errors.append(e)

    def create_meanwhile(conn: Any, tenants: list[str]) -> None:
        if new in tenants and not fired.is_set():
            fired.set()
            with engine.begin() as other:  # another process's first decision for `new`, committed
                create(other, [new])
            t3 = threading.Thread(target=third)
            t3.start()
            wait_blocked_or_done(engine, t3)
            threads.append(t3)
        create(conn, tenants)

    threads: list[threading.Thread] = []
    monkeypatch.setattr(audit, "_create_heads", create_meanwhile)
    try:
        audit.write_rows(engine, mixed([new, old], tag=2))
    except BaseException as e:  # reported below
        errors.append(e)
    for t in threads:
        t.join(30)
    assert fired.is_set()
    assert errors == []
    assert_intact(engine, [new], 4)
    assert_intact(engine, [old], 6)


def test_concurrent_first_writes_keep_every_chain(engine) -> None:
    """Threads writing batches that mix new tenants with existing ones: no error, every head, every chain intact."""
    existing = names("e1", "e2", "e3")
    for t in existing:
        audit.write_rows(engine, plain_rows(1, t))
    fresh = names(*(f"n{i}" for i in range(6)))
    rounds, workers = 6, 4
    errors: list[BaseException] = []
    start = threading.Barrier(workers)

    def work(w: int) -> None:
        try:
            start.wait()
            for i in range(rounds):  # each batch: a new tenant (shared by all workers) and two existing ones
                tenants = sorted({fresh[i], existing[(w + i) % 3], existing[(w + i + 1) % 3]})
                audit.write_rows(engine, mixed(tenants[::-1] if w % 2 else tenants, tag=w * 100 + i))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert_intact(engine, fresh, workers * 2)
    with engine.connect() as c:
        written = c.execute(text("SELECT count(*) FROM audit_log WHERE tenant_id = ANY(:t)"), {"t": existing}).scalar()
    assert written == 3 + rounds * workers * 2 * 2
    with Session(engine) as s:
        assert all(audit_verify.verify_tenant(s, t).intact for t in existing)


def test_a_new_tenant_needs_no_second_pooled_connection(pg_database: str) -> None:
    """A tenant's first head is created on the batch's own connection, before its transaction: one pooled connection."""
    from sqlalchemy import create_engine

    eng = create_engine(pg_database, pool_size=1, max_overflow=0, pool_timeout=2)
    try:
        [tenant] = names("solo")
        audit.write_rows(eng, plain_rows(3, tenant, tag=1))
        writer = audit.AuditWriter(eng)
        writer._write(plain_rows(2, tenant, tag=2))  # the group-commit writer's path, a known head now
        [other] = names("other")
        writer._write(plain_rows(2, other, tag=3))  # and a new one on the writer's kept connection
        writer.close()
        assert_intact(eng, [tenant], 5)
        assert_intact(eng, [other], 2)
    finally:
        eng.dispose()
