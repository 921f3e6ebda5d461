"""The append-only audit log: rows chained and written with group commit, and the tenant's queries over them.

Every decision is audited *before* its answer leaves the server: a request hands its rows to the
writer thread and awaits the commit. The writer drains whatever is waiting and commits it in one
transaction, so under load many requests share one commit (and SQLite's single writer lock is
taken once per batch instead of once per request). If the write fails, the requests waiting on it
fail with 503 and no answer is returned.

Each tenant's rows form a hash chain (`app.services.audit_chain`). A batch extends the chains of
its tenants under one lock per tenant: the tenant's row of `audit_chain_heads`, locked FOR UPDATE
in the batch's transaction (in tenant order, so two server processes never deadlock); SQLite takes
its database write lock with the first statement instead. Rows and heads commit together.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from app.services import serving
from app.services.audit_chain import START, Link, link_rows
from app.services.errors import Unavailable
from app.services.monitoring import records_missing_filled
from app.tables import AuditChainHead, AuditRecord, utcnow
from models.rulelist import Feature

log = logging.getLogger("neurules.audit")

MAX_BATCH_ROWS = 5000


def audit_rows(
    tenant_id: str,
    key_id: str,
    version_id: str,
    features: Sequence[Feature],
    records: list[Any],
    results: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """The audit rows of one request: one per decision, with the input digest, the output and missing_filled."""
    now = utcnow()
    filled = records_missing_filled(features, records)
    return [
        {
            "created_at": now,
            "tenant_id": tenant_id,
            "api_key_id": key_id,
            "model_version_id": version_id,
            "input_digest": serving.digest(rec),
            "output": {"prediction": res["prediction"], "probabilities": res["probabilities"]},
            "rule_id": res["rule_id"],
            "missing_filled": f,
        }
        for rec, res, f in zip(records, results, filled, strict=True)
    ]


def append_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Chain and insert rows in the caller's transaction: one head lock per tenant, then one INSERT."""
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    chained = [dict(r) for r in rows]  # the callers' dicts stay as they were
    for r in chained:
        by_tenant.setdefault(r["tenant_id"], []).append(r)
    heads = lock_heads(conn, sorted(by_tenant))
    now = utcnow()
    moved = []
    for tenant, tenant_rows in by_tenant.items():
        seq, row_hash = link_rows(tenant_rows, heads.get(tenant, START))
        moved.append({"t": tenant, "new_seq": seq, "new_hash": row_hash, "at": now})
    conn.execute(_INSERT_ROWS, chained)
    conn.execute(_MOVE_HEAD, moved)


# built once: the statement cache then skips compiling them on every batch (~0.2 ms each on a busy VM)
_INSERT_ROWS = insert(AuditRecord)
_MOVE_HEAD = (
    update(AuditChainHead)
    .where(AuditChainHead.tenant_id == bindparam("t"))
    .values(seq=bindparam("new_seq"), row_hash=bindparam("new_hash"), updated_at=bindparam("at"))
)
_HEADS = (
    select(AuditChainHead.tenant_id, AuditChainHead.seq, AuditChainHead.row_hash)
    .where(AuditChainHead.tenant_id.in_(bindparam("tenants", expanding=True)))
    .order_by(AuditChainHead.tenant_id)
)
_LOCK_HEADS = _HEADS.with_for_update()


def lock_heads(conn: Connection, tenants: list[str]) -> dict[str, Link]:
    """Lock the chain heads of `tenants` (sorted) until the transaction ends, creating missing ones; their links."""
    if conn.dialect.name == "sqlite":
        _create_heads(conn, tenants)  # a write first: the transaction now holds SQLite's one write lock
        return _read_heads(conn, tenants, lock=False)
    heads = _read_heads(conn, tenants, lock=True)
    missing = [t for t in tenants if t not in heads]
    if missing:  # a tenant's first decision: create its head (ON CONFLICT: another process may be doing so)
        _create_heads(conn, missing)
        heads.update(_read_heads(conn, missing, lock=True))
    return heads


def _read_heads(conn: Connection, tenants: list[str], *, lock: bool) -> dict[str, Link]:
    rows = conn.execute(_LOCK_HEADS if lock else _HEADS, {"tenants": tenants})
    return {t: Link(seq, h) for t, seq, h in rows}


def _create_heads(conn: Connection, tenants: list[str]) -> None:
    dialect_insert = sqlite.insert if conn.dialect.name == "sqlite" else postgresql.insert
    now = utcnow()
    stmt = dialect_insert(AuditChainHead).on_conflict_do_nothing(index_elements=["tenant_id"])
    conn.execute(
        stmt, [{"tenant_id": t, "seq": START.seq, "row_hash": START.row_hash, "updated_at": now} for t in tenants]
    )


def write_rows(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Chain and insert audit rows in one transaction (synchronous)."""
    with engine.begin() as conn:
        append_rows(conn, rows)


class AuditWriter:
    """A background thread that commits queued audit rows in batches and wakes their requests."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._q: queue.SimpleQueue[tuple[list[dict[str, Any]], asyncio.AbstractEventLoop, asyncio.Future[None]] | None]
        self._q = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._conn: Connection | None = None  # the writer thread's own connection, kept between batches

    def _ensure(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="neurules-audit", daemon=True)
                    self._thread.start()

    async def write(self, rows: list[dict[str, Any]]) -> None:
        """Queue rows and wait until they are committed (Unavailable when they cannot be)."""
        self._ensure()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._q.put((rows, loop, fut))
        await fut

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                self._drop_connection()
                return
            batch = [item]
            n = len(item[0])
            while n < MAX_BATCH_ROWS:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                batch.append(nxt)
                n += len(nxt[0])
            err: BaseException | None = None
            try:
                self._write([r for rows, _, _ in batch for r in rows])
            except Exception as e:  # noqa: BLE001 -- the database is down or refused: fail the waiting requests
                log.error("audit write failed", extra={"rows": n, "error": repr(e)})
                err = e
                self._drop_connection()
            for _, loop, fut in batch:
                with contextlib.suppress(RuntimeError):  # the loop is closed (shutdown)
                    loop.call_soon_threadsafe(_settle, fut, err)

    def _write(self, rows: list[dict[str, Any]]) -> None:
        for attempt in range(2):
            if self._conn is None:
                self._conn = self.engine.connect()  # the pool pre-pings: a fresh connection after a restart
            trans = self._conn.begin()
            try:
                append_rows(self._conn, rows)
            except DBAPIError as e:
                self._drop_connection()
                if attempt == 0 and e.connection_invalidated:
                    continue  # the kept connection died while idle (the database restarted); nothing was written
                raise
            trans.commit()  # a failure here is in doubt: reported (503), never retried, so no row is written twice
            return

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # already broken
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Stop the writer after the rows already queued."""
        if self._thread is not None and self._thread.is_alive():
            self._q.put(None)
            self._thread.join(10)
        self._drop_connection()


def _settle(fut: asyncio.Future[None], err: BaseException | None) -> None:
    if fut.done():
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(
            Unavailable("the audit log could not be written; the decision was not returned", dependency="audit")
        )


def write_rows_or_unavailable(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """`write_rows`, with any failure reported as Unavailable (no decision leaves without its audit rows)."""
    try:
        write_rows(engine, rows)
    except Exception as e:  # noqa: BLE001 -- whatever broke, the answer is 503, never a 500
        log.error("audit write failed", extra={"rows": len(rows), "error": repr(e)})
        raise Unavailable(
            "the audit log could not be written; the decisions were not returned", dependency="audit"
        ) from None


def list_records(
    session: Session,
    tenant_id: str,
    *,
    model_version_id: str | None = None,
    input_digest: str | None = None,
    before_id: int | None = None,
    limit: int,
) -> list[AuditRecord]:
    """The tenant's audit records, newest first, optionally filtered (page backwards with `before_id`)."""
    q = select(AuditRecord).where(AuditRecord.tenant_id == tenant_id)
    if model_version_id:
        q = q.where(AuditRecord.model_version_id == model_version_id)
    if input_digest:
        q = q.where(AuditRecord.input_digest == input_digest)
    if before_id:
        q = q.where(AuditRecord.id < before_id)
    return list(session.scalars(q.order_by(AuditRecord.id.desc()).limit(limit)).all())
