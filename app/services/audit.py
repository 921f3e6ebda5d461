"""The append-only audit log: rows chained and written with group commit, and the tenant's queries over them.

Every decision is audited *before* its answer leaves the server: a request hands its rows to the
writer thread and awaits the commit. The writer drains whatever is waiting and commits it in one
transaction, so under load many requests share one commit (and SQLite's single writer lock is
taken once per batch instead of once per request). If the write fails, the requests waiting on it
fail with 503 and no answer is returned.

Each tenant's rows form a hash chain (`app.services.audit_chain`). A batch extends the chains of
its tenants under one lock per tenant: the tenant's row of `audit_chain_heads`, locked FOR UPDATE
in the batch's transaction (in tenant order, so server processes never deadlock; a tenant's first
head is created and committed beforehand); SQLite takes its database write lock with the first
statement instead. Rows and heads commit together.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Container, Iterator, Sequence
from typing import Any, cast, overload

import psycopg
from psycopg import abc as pg_abc
from psycopg.adapt import PyFormat, Transformer
from psycopg.types.json import Json, JsonDumper
from sqlalchemy import Connection, Dialect, Engine, bindparam, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session
from sqlalchemy.sql.compiler import SQLCompiler

from app.db import is_sqlite_read_only, outage_cause, sqlite_file
from app.services import audit_one_statement, audit_read, serving, wal_checkpoint, wal_sync
from app.services.audit_chain import START, Link, link_columns, link_rows
from app.services.errors import NotFound, Unavailable
from app.services.monitoring import records_missing_filled
from app.tables import AuditChainHead, AuditRecord, ModelVersion, utcnow
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
    categorical: Container[str],
) -> list[dict[str, Any]]:
    """The audit rows of one request: one per decision, with the input digest, the output and missing_filled
    (`categorical`: the model's categorical fields, for the digest)."""
    now = utcnow()
    filled = records_missing_filled(features, records)
    return [
        {
            "created_at": now,
            "tenant_id": tenant_id,
            "api_key_id": key_id,
            "model_version_id": version_id,
            "input_digest": serving.digest(rec, categorical),
            "output": {"prediction": res["prediction"], "probabilities": res["probabilities"]},
            "rule_id": res["rule_id"],
            "missing_filled": f,
        }
        for rec, res, f in zip(records, results, filled, strict=True)
    ]


def append_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Chain and insert rows in the caller's transaction: one head lock per tenant, then one INSERT.

    Returns each row's place in its tenant's chain (`seq`), in the order of `rows`.
    """
    if isinstance(rows, ColumnRows) and len(set(rows.columns["tenant_id"])) == 1:
        return _append_columns(conn, rows)
    by_tenant: dict[str, list[dict[str, Any]]] = {}
    chained = list(rows) if isinstance(rows, ColumnRows) else [dict(r) for r in rows]  # callers' dicts untouched
    for r in chained:
        by_tenant.setdefault(r["tenant_id"], []).append(r)
    heads = lock_heads(conn, sorted(by_tenant))
    now = utcnow()
    moved = []
    for tenant, tenant_rows in by_tenant.items():
        seq, row_hash = link_rows(tenant_rows, heads.get(tenant, START))
        moved.append({"t": tenant, "new_seq": seq, "new_hash": row_hash, "at": now})
    insert_rows(conn, chained)
    execute_fixed(conn, "move_head", moved)
    return [r["seq"] for r in chained]


def _append_columns(conn: Connection, rows: ColumnRows) -> list[int]:
    """`append_rows` for one tenant's rows held column-wise (a CSV chunk): linked and inserted as columns."""
    tenant = rows.columns["tenant_id"][0]
    head = lock_heads(conn, [tenant]).get(tenant, START)
    links = link_columns(rows.columns, len(rows), head)
    insert_columns(conn, {**rows.columns, "seq": links.seq, "prev_hash": links.prev_hash, "row_hash": links.row_hash})
    execute_fixed(
        conn, "move_head", [{"t": tenant, "new_seq": links.head.seq, "new_hash": links.head.row_hash, "at": utcnow()}]
    )
    return links.seq


# built once: the statement cache then skips compiling them on every batch (~0.2 ms each on a busy VM)
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
_HEAD = select(AuditChainHead.seq, AuditChainHead.row_hash).where(AuditChainHead.tenant_id == bindparam("t"))
_FIXED = {"move_head": _MOVE_HEAD, "head": _HEAD}  # what `execute_fixed` runs, by name


@functools.cache
def _fixed(dialect: Dialect, name: str) -> tuple[str, list[str] | None, dict[str, Any]]:
    """A `_FIXED` statement compiled for the dialect: its SQL, its parameter order (positional) and bind processors."""
    compiled = _FIXED[name].compile(dialect=dialect)
    processors = {k: b.type.dialect_impl(dialect).bind_processor(dialect) for k, b in compiled.binds.items()}
    return (
        compiled.string,
        compiled.positiontup if compiled.positional else None,
        {k: p for k, p in processors.items() if p is not None},
    )


def execute_fixed(conn: Connection, name: str, params: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Run a `_FIXED` statement as precompiled driver SQL (no per-execute compile, cache key or bind setup); its rows.

    The values go through the bind processors SQLAlchemy itself would use (a time to text on SQLite).
    """
    sql, order, processors = _fixed(conn.dialect, name)
    converted = [{**p, **{k: f(p[k]) for k, f in processors.items()}} for p in params] if processors else params
    driver: list[Any] = [tuple(p[k] for k in order) for p in converted] if order is not None else converted
    return run_driver_sql(conn, sql, driver)


def run_driver_sql(conn: Connection, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Run compiled SQL with driver-ready parameters (one set, or many by executemany); the rows it returns.

    On SQLite the statement goes to the sqlite3 cursor itself: SQLAlchemy's execution context costs
    ~60 us a statement there, about half of the writer's time for a one-row batch (three statements),
    and that time is on every request's path at concurrency 1. Errors still come as SQLAlchemy's
    `DBAPIError` (the same subclass `exec_driver_sql` raises), so callers handle both paths alike.
    """
    # outside a SQLAlchemy transaction its autobegin must see the statement (or a later commit() would do nothing)
    direct = conn.dialect.name == "sqlite" and not conn.closed and conn.in_transaction()
    raw = conn.connection.dbapi_connection if direct else None
    if raw is None:
        result = conn.exec_driver_sql(sql, params[0] if len(params) == 1 else params)
        return [tuple(row) for row in result] if result.returns_rows else []
    cursor = raw.cursor()
    try:
        if len(params) == 1:
            cursor.execute(sql, params[0])
        else:
            cursor.executemany(sql, params)
        return list(cursor.fetchall())
    except sqlite3.Error as e:
        if is_sqlite_read_only(e):  # as the engine's handle_error does for its own statements (app.db)
            conn.engine.dispose(close=False)
        raise DBAPIError.instance(sql, params, e, sqlite3.Error, dialect=conn.dialect, ismulti=len(params) > 1) from e
    finally:
        cursor.close()


def lock_heads(conn: Connection, tenants: list[str]) -> dict[str, Link]:
    """Lock the chain heads of `tenants` (sorted) until the transaction ends, creating missing ones; their links.

    On PostgreSQL a missing head is created first, committed in a short transaction of its own, and
    only then are all heads locked, in one statement in tenant order: locking the existing heads
    first and a new one after them would break the order (and two batches could deadlock).
    """
    if conn.dialect.name == "sqlite":
        if not take_sqlite_write_lock(conn):  # a transaction was open already: its first write takes the lock
            _create_heads(conn, tenants)
            return _read_heads(conn, tenants, lock=False)
        heads = _read_heads(conn, tenants, lock=False)
        missing = [t for t in tenants if t not in heads]
        if missing:  # with the write lock held no other process can be creating them
            _create_heads(conn, missing)
            heads.update(dict.fromkeys(missing, START))
        return heads
    known = _heads_known.setdefault(conn.engine, set())
    unknown = [t for t in tenants if t not in known]
    if unknown:
        _ensure_heads(conn.engine, unknown)
        known.update(unknown)
    heads = _read_heads(conn, tenants, lock=True)
    missing = [t for t in tenants if t not in heads]
    if missing:  # deleted since this process saw them (the verifier reports it): created again, locked last
        log.warning("audit chain heads gone", extra={"tenants": missing})
        known.difference_update(missing)
        _ensure_heads(conn.engine, missing)
        heads.update(_read_heads(conn, missing, lock=True))
    return heads


SQLITE_LOCK_POLL_S = 0.0002  # first pause between tries for SQLite's write lock while another process holds it
SQLITE_LOCK_MAX_POLL_S = 0.001  # the pauses grow to this


def take_sqlite_write_lock(conn: Connection) -> bool:
    """Open the transaction with SQLite's write lock (BEGIN IMMEDIATE), trying every 0.2-1 ms while it is held;
    False when a transaction was already open (left as it is, the lock not necessarily held).

    SQLite's own busy handler sleeps 1, 2, 5, 10 ... 100 ms between tries, so with two server
    processes committing audit batches back to back the waiting one kept missing the short gaps
    and its requests waited hundreds of milliseconds (p99 0.4-0.9 s at c=32, embedded, 2 processes).
    A transaction already open on this connection (a statement ran before) is left as it is.
    """
    raw = conn.connection.dbapi_connection
    if raw is None or getattr(raw, "in_transaction", True):
        return False
    before = _busy_timeout(conn)
    deadline = time.monotonic() + before / 1000  # then "database is locked" (503): the engine's own busy timeout
    raw.execute("PRAGMA busy_timeout=0")
    pause = SQLITE_LOCK_POLL_S
    try:
        while True:
            try:
                raw.execute("BEGIN IMMEDIATE")  # fails at once, with no transaction open, while another writer holds it
                return True
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 1.5, SQLITE_LOCK_MAX_POLL_S)  # a long hold (a migration): not 5,000 tries a second
    finally:
        raw.execute(f"PRAGMA busy_timeout={before}")


def _busy_timeout(conn: Connection) -> int:
    """The connection's SQLite busy timeout (ms), read once per DBAPI connection (the pool clears `info` on reconnect).

    Assumes nothing but `take_sqlite_write_lock` changes it after the connect-time PRAGMA (`app.db`): a later
    change would be reset to the first value read after the next audit write.
    """
    info = conn.connection.info  # lives as long as the DBAPI connection
    if "sqlite_busy_timeout" not in info:
        raw = conn.connection.dbapi_connection
        info["sqlite_busy_timeout"] = int(raw.execute("PRAGMA busy_timeout").fetchone()[0])  # type: ignore[union-attr]
    return int(info["sqlite_busy_timeout"])


# per engine, the tenants whose chain head this process has seen (heads are never deleted by the service)
_heads_known: weakref.WeakKeyDictionary[Engine, set[str]] = weakref.WeakKeyDictionary()


def prepare_heads(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """Before the batch's transaction, on its connection: create the chain heads this process has not seen yet.

    So `lock_heads` finds them and needs no second pooled connection while the first holds a
    transaction (with every pooled connection held that way, none would be left). PostgreSQL only.
    """
    if conn.dialect.name == "sqlite" or conn.in_transaction():
        return
    tenants = set(rows.columns["tenant_id"]) if isinstance(rows, ColumnRows) else {r["tenant_id"] for r in rows}
    known = _heads_known.setdefault(conn.engine, set())
    unknown = sorted(tenants - known)
    if unknown:
        with conn.begin():
            _ensure_heads_in(conn, unknown)
        known.update(unknown)


def _ensure_heads(engine: Engine, tenants: list[str]) -> None:
    """Create the missing heads among `tenants` in a transaction of its own, committed before any head is locked."""
    with engine.begin() as conn:
        _ensure_heads_in(conn, tenants)


def _ensure_heads_in(conn: Connection, tenants: list[str]) -> None:
    """Insert the heads that do not exist (ON CONFLICT: another process may be creating the same one).

    It locks nothing another batch waits for; that short transaction is all it waits for.
    """
    missing = sorted(set(tenants) - set(_read_heads(conn, tenants, lock=False)))
    if missing:
        _create_heads(conn, missing)


def _read_heads(conn: Connection, tenants: list[str], *, lock: bool) -> dict[str, Link]:
    if len(tenants) == 1 and not lock:  # the usual batch: one tenant, as precompiled SQL
        found = execute_fixed(conn, "head", [{"t": tenants[0]}])
        return {tenants[0]: Link(found[0][0], found[0][1])} if found else {}
    rows = conn.execute(_LOCK_HEADS if lock else _HEADS, {"tenants": tenants})
    return {t: Link(seq, h) for t, seq, h in rows}


def _create_heads(conn: Connection, tenants: list[str]) -> None:
    dialect_insert = sqlite.insert if conn.dialect.name == "sqlite" else postgresql.insert
    now = utcnow()
    stmt = dialect_insert(AuditChainHead).on_conflict_do_nothing(index_elements=["tenant_id"])
    conn.execute(
        stmt, [{"tenant_id": t, "seq": START.seq, "row_hash": START.row_hash, "updated_at": now} for t in tenants]
    )


def write_rows(engine: Engine, rows: Sequence[dict[str, Any]]) -> list[int]:
    """Chain and insert audit rows in one transaction (synchronous); their chain `seq`s."""
    with engine.connect() as conn:
        wal_sync.refuse_if_failed(conn)
        prepare_heads(conn, rows)
        with conn.begin():
            return append_rows(conn, rows)


class ColumnRows(Sequence[dict[str, Any]]):
    """Audit rows held column-wise (a large batch): inserted as columns, read as row dicts where needed."""

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        self.columns = columns
        self._n = len(next(iter(columns.values()), []))

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, i: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        return {name: values[i] for name, values in self.columns.items()}


def insert_rows(conn: Connection, rows: Sequence[dict[str, Any]]) -> None:
    """INSERT audit rows (all with the same keys) in the caller's transaction, as one executemany."""
    if isinstance(rows, ColumnRows):
        insert_columns(conn, rows.columns)
    elif rows:
        insert_columns(conn, {name: [r[name] for r in rows] for name in rows[0]})


def insert_columns(conn: Connection, columns: dict[str, list[Any]]) -> None:
    """INSERT audit rows given column-wise (equal lengths) in the caller's transaction, as one executemany.

    SQLAlchemy's executemany converts every value of every row (a JSON dump of `output`, a datetime
    to text on SQLite: ~15 us a row); here each column's converter (the one SQLAlchemy would use)
    runs once per distinct object (rows share their `created_at` and, per rule, their `output`), so
    a large batch costs little more than the driver's own executemany.
    """
    names = list(columns)
    compiled, converters = _statement(conn.dialect, tuple(names))
    converted = {n: _converted(columns[n], convert) for n, convert in zip(names, converters, strict=True)}
    if conn.dialect.name == "postgresql" and len(columns[names[0]]) >= COPY_MIN_ROWS:
        _copy(conn, converted)
        return
    if compiled.positional:
        params: list[Any] = list(zip(*(converted[k] for k in compiled.positiontup or ()), strict=True))
    else:
        params = [dict(zip(names, values, strict=True)) for values in zip(*converted.values(), strict=True)]
    if params:
        run_driver_sql(conn, compiled.string, params)


COPY_MIN_ROWS = 1000  # from this many rows (a CSV batch's chunk) PostgreSQL gets them by COPY, ~10x faster


def _copy(conn: Connection, converted: dict[str, list[Any]]) -> None:
    """COPY the rows in the connection's transaction, as text built a block at a time (see `copy_text`)."""
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    columns = [_json_as_text(values) for values in converted.values()]
    names = ", ".join(converted)  # the table's own column names
    try:
        with cursor.copy(f"COPY {AuditRecord.__tablename__} ({names}) FROM STDIN") as copy:
            tx = Transformer.from_context(cursor)  # type: ignore[arg-type]  # a psycopg cursor
            for block in copy_text(columns, tx):
                copy.write(block)
    finally:
        cursor.close()


COPY_BLOCK_ROWS = 8192


def copy_text(columns: list[list[Any]], tx: pg_abc.Transformer) -> Iterator[bytes]:
    """The rows in COPY's text format, as psycopg's `write_row` writes them, in blocks of COPY_BLOCK_ROWS rows.

    Each distinct value is dumped (psycopg's own text dumpers) and escaped once; a column holding one
    value goes into the row template as text; strings needing no escape and ints are rendered in bulk.
    """
    parts: list[bytes] = []
    varying: list[list[bytes]] = []
    for values in columns:
        texts = _copy_column(values, tx)
        if isinstance(texts, bytes):
            parts.append(texts.replace(b"%", b"%%"))
        else:
            parts.append(b"%s")
            varying.append(texts)
    template = b"\t".join(parts) + b"\n"
    n = len(columns[0]) if columns else 0
    for start in range(0, n, COPY_BLOCK_ROWS):
        if not varying:
            yield template * min(COPY_BLOCK_ROWS, n - start)
            continue
        block = [texts[start : start + COPY_BLOCK_ROWS] for texts in varying]
        yield b"".join(map(template.__mod__, zip(*block, strict=True)))


_COPY_SPECIAL = "\b\t\n\v\f\r\\\x00"  # what COPY's text format escapes, and NUL (psycopg's dumper refuses it)
_COPY_ESCAPE = re.compile(b"[\b\t\n\v\f\r\\\\]")
_COPY_ESCAPES = {bytes([c]): b"\\" + bytes([e]) for c, e in zip(b"\b\t\n\v\f\r\\", b"btnvfr\\", strict=True)}


def _copy_column(values: list[Any], tx: pg_abc.Transformer) -> bytes | list[bytes]:
    """One column's COPY texts: one text when all rows hold equal strings or one object, else one per row."""
    first = values[0]
    if type(first) is str:
        if values.count(first) == len(values):
            return _copy_value(first, tx)
        with contextlib.suppress(TypeError):  # not all strings
            joined = "".join(values)
            if tx.encoding in ("utf-8", "utf8") and not any(c in joined for c in _COPY_SPECIAL):
                return list(map(str.encode, values))  # psycopg's str dumper: the UTF-8 bytes
    elif type(first) is int and set(map(type, values)) == {int}:
        return list(map(b"%d".__mod__, values))  # psycopg's int dumper: the decimal digits
    ids = list(map(id, values))
    distinct = dict(zip(ids, values, strict=True))
    if len(distinct) == 1:
        return _copy_value(first, tx)
    texts = {key: _copy_value(v, tx) for key, v in distinct.items()}
    return list(map(texts.__getitem__, ids))


def _copy_value(value: Any, tx: pg_abc.Transformer) -> bytes:
    """One value as `write_row` writes it: psycopg's text dump, escaped for COPY; NULL as \\N."""
    (dumped,) = tx.dump_sequence([value], [PyFormat.TEXT])
    return rb"\N" if dumped is None else _COPY_ESCAPE.sub(lambda m: _COPY_ESCAPES[m.group(0)], bytes(dumped))


def _json_as_text(values: list[Any]) -> list[Any]:
    """psycopg's `Json` wrappers (SQLAlchemy's bind values) as the text psycopg would send, once per object."""
    if not values or not isinstance(values[0], Json):
        return values
    dumper = JsonDumper(Json)  # psycopg's own rendering (its dumps, or the one set globally)
    return _per_object(values, lambda v: bytes(dumper.dump(v) or b"null").decode())


def _per_object(values: list[Any], convert: Any) -> list[Any]:
    """`convert` of each value, called once per distinct object (rows share their time and, per rule, output)."""
    ids = list(map(id, values))
    distinct = dict(zip(ids, values, strict=True))
    if len(distinct) == 1:
        return [convert(values[0])] * len(values)
    done = {key: convert(v) for key, v in distinct.items()}
    return list(map(done.__getitem__, ids))


@functools.cache
def _statement(dialect: Dialect, names: tuple[str, ...]) -> tuple[SQLCompiler, list[Any]]:
    """The INSERT of these columns compiled for the dialect, and each column's bind processor (built once)."""
    compiled = insert(AuditRecord).compile(dialect=dialect, column_keys=list(names))
    columns = AuditRecord.__table__.c
    return compiled, [columns[n].type.dialect_impl(dialect).bind_processor(dialect) for n in names]


def _converted(values: list[Any], convert: Any) -> list[Any]:
    """`convert` (a column type's bind processor) applied once per distinct object among `values`."""
    return values if convert is None or not values else _per_object(values, convert)


Waiter = tuple[list[dict[str, Any]], asyncio.Future[list[int]]]
Handoff = tuple[asyncio.AbstractEventLoop, list[Waiter]]


class AuditWriter:
    """A background thread that commits queued audit rows in batches and wakes their requests.

    Group commit in two steps: the requests of one event-loop tick are handed to the thread together
    (one queue put, one thread wake-up), and the thread commits whatever has been handed over since
    its last commit in one transaction, then settles all their futures with one call into the loop.
    """

    CLOSE_WAIT_S = 10.0  # how long `close` waits for the rows already queued

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._q: queue.SimpleQueue[Handoff | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._conn: Connection | None = None  # the writer thread's own connection, kept between batches
        self._pending: dict[asyncio.AbstractEventLoop, list[Waiter]] = {}  # per loop: this tick's requests
        self.checkpointer = wal_checkpoint.checkpointer_for(engine)  # SQLite file: its WAL copied back off our path
        self.log_sync: wal_sync.LogSync | None = None  # FULL on a SQLite file: the log synced after each commit
        self._conn_deferred = False  # the held connection commits with NORMAL (`wal_sync`), FULL again when dropped

    def _ensure(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="neurules-audit", daemon=True)
                    self._thread.start()
                    if self.checkpointer is not None:
                        self.checkpointer.start()

    async def write(self, rows: list[dict[str, Any]]) -> list[int]:
        """Queue rows and wait until they are committed (Unavailable when they cannot be); their chain `seq`s."""
        self._ensure()
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[int]] = loop.create_future()
        pending = self._pending.get(loop)
        if pending is None:
            pending = self._pending[loop] = []
            loop.call_soon(self._hand_over, loop)
        pending.append((rows, fut))
        return await fut

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        self._q.put((loop, self._pending.pop(loop)))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                self._drop_connection()
                if self.log_sync is not None:
                    self.log_sync.close()
                return
            batch = [item]
            n = sum(len(rows) for rows, _ in item[1])
            while n < MAX_BATCH_ROWS:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._q.put(None)
                    break
                batch.append(nxt)
                n += sum(len(rows) for rows, _ in nxt[1])
            err: BaseException | None = None
            seqs: list[int] = []
            try:
                seqs = self._write([r for _, waiters in batch for rows, _ in waiters for r in rows])
            except Exception as e:  # noqa: BLE001 -- the database is down or refused: fail the waiting requests
                log.error("audit write failed", extra={"rows": n, "error": repr(e)})
                err = e
                self._drop_connection()
            if err is None and self.checkpointer is not None:
                self.checkpointer.notify()
            at = 0
            for loop, waiters in batch:
                settled = []
                for rows, fut in waiters:
                    settled.append((fut, seqs[at : at + len(rows)]))
                    at += len(rows)
                with contextlib.suppress(RuntimeError):  # the loop is closed (shutdown)
                    loop.call_soon_threadsafe(_settle, settled, err)

    def check(self) -> None:
        """Readiness: SyncFailed once a sync of the audit log failed (no decision is audited until a restart)."""
        if self.log_sync is not None:
            self.log_sync.check()

    def _write(self, rows: list[dict[str, Any]]) -> list[int]:
        if self.log_sync is not None:
            self.log_sync.check()  # an earlier sync failed: nothing more is written (`wal_sync`)
        for attempt in range(2):
            if self._conn is None:
                self._conn = self.engine.connect()  # the pool pre-pings: a fresh connection after a restart
                self._own_connection(self._conn)
            try:
                prepare_heads(self._conn, rows)
                one = _one_statement(self._conn, rows)
                if one is not None:
                    return one
                trans = self._conn.begin()
                seqs = append_rows(self._conn, rows)
            except DBAPIError as e:
                self._drop_connection()
                if attempt == 0 and e.connection_invalidated:
                    continue  # the kept connection died while idle (the database restarted); nothing was written
                raise
            except _InDoubt as e:  # the one statement's connection broke: it may have committed, or still may
                with contextlib.suppress(Exception):
                    self._conn.invalidate()  # broken: not back into the pool (its reset would log a traceback)
                self._drop_connection()
                with self.engine.connect() as fresh:
                    audit_one_statement.end_backend(_raw_pg(fresh), e.backend)  # StillRunning: 503, no retry
                    found = audit_one_statement.committed_seqs(_raw_pg(fresh), e.columns, e.created_at)
                if found is not None:
                    return found
                if attempt == 0:
                    continue  # not written: once more, on a fresh connection
                raise e.error from None
            trans.commit()  # a failure here is in doubt: reported (503), never retried, so no row is written twice
            log_sync = self.log_sync if self._conn_deferred else None
            if log_sync is not None:
                log_sync.sync()  # durable before any request of the batch is answered (`wal_sync`)
            return seqs
        raise AssertionError("unreachable: the second attempt returns or raises")

    def _own_connection(self, conn: Connection) -> None:
        """The writer's connection on a SQLite file: the checkpointer's threshold, the log synced outside the lock."""
        if self.checkpointer is not None and self.checkpointer.alive():
            wal_checkpoint.raise_autocheckpoint(conn)
        if sqlite_file(self.engine) is None:
            return
        wal = wal_sync.defer_sync(conn)
        self._conn_deferred = wal is not None
        if wal is None:
            return
        if self.log_sync is None or self.log_sync.wal_path != wal:
            if self.log_sync is not None:
                self.log_sync.close()
            self.log_sync = wal_sync.LogSync(wal)
        self.log_sync.open()

    def _drop_connection(self) -> None:
        if self._conn is not None:
            if self.checkpointer is not None:
                with contextlib.suppress(Exception):  # broken: the pool replaces it anyway
                    wal_checkpoint.restore_autocheckpoint(self._conn)
            if self._conn_deferred:
                self._conn_deferred = False
                try:
                    wal_sync.restore_sync(self._conn)
                except Exception:  # noqa: BLE001 -- not FULL again (mid-transaction, broken): never back into the pool
                    with contextlib.suppress(Exception):
                        self._conn.invalidate()
            with contextlib.suppress(Exception):  # already broken
                self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Stop the writer after the rows already queued."""
        if self._thread is not None and self._thread.is_alive():
            self._q.put(None)
            self._thread.join(self.CLOSE_WAIT_S)
        if self.checkpointer is not None:
            self.checkpointer.stop()
        if self._thread is not None and self._thread.is_alive():  # still in a write: its connection is its own
            log.warning("audit writer still writing at shutdown; its connection is left to it")
            return
        self._drop_connection()
        if self.log_sync is not None:
            self.log_sync.close()


class _InDoubt(Exception):
    """The connection broke while the one statement ran (`_one_statement`): whether it commits is unknown."""

    def __init__(
        self, columns: dict[str, list[Any]], created_at: Any, backend: audit_one_statement.Backend, error: Exception
    ) -> None:
        super().__init__(repr(error))
        self.columns, self.created_at, self.backend, self.error = columns, created_at, backend, error


def _one_statement(conn: Connection, rows: list[dict[str, Any]]) -> list[int] | None:
    """A small one-tenant batch on PostgreSQL by one autocommitted statement; None where that path does not apply.

    None also when the tenant's head has gone (nothing was written): the transactional path recreates it.
    """
    if conn.dialect.name != "postgresql" or not rows:
        return None
    columns = {name: [r[name] for r in rows] for name in rows[0]}
    if not audit_one_statement.fits(columns):
        return None
    raw = _raw_pg(conn)
    if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:  # autocommit cannot be set now
        return None
    names = audit_one_statement.COLUMNS
    converters = _statement(conn.dialect, names)[1]  # as the transactional path binds them (times in UTC)
    bound = {n: _converted(columns[n], convert) for n, convert in zip(names, converters, strict=True)}
    bound["output"] = _json_as_text(bound["output"])
    backend = audit_one_statement.backend_of(raw, conn.connection.info)
    try:
        return audit_one_statement.append(raw, columns, bound)
    except psycopg.OperationalError as e:
        if raw.closed:
            raise _InDoubt(columns, bound["created_at"][0], backend, e) from e
        raise


def _raw_pg(conn: Connection) -> psycopg.Connection[Any]:
    return cast("psycopg.Connection[Any]", conn.connection.dbapi_connection)


def _settle(settled: list[tuple[asyncio.Future[list[int]], list[int]]], err: BaseException | None) -> None:
    for fut, seqs in settled:
        if fut.done():
            continue
        if err is None:
            fut.set_result(seqs)
        else:
            fut.set_exception(Unavailable(_unwritten("the decision was not returned", err), dependency="audit"))


def _unwritten(what: str, err: BaseException) -> str:
    """The 503's message when audit rows could not be written, with the cause where one is known."""
    cause = str(err) if isinstance(err, wal_sync.SyncFailed) else outage_cause(err)
    return f"the audit log could not be written; {what}" + (f" ({cause})" if cause else "")


def write_rows_or_unavailable(engine: Engine, rows: Sequence[dict[str, Any]]) -> list[int]:
    """`write_rows` (the rows' chain `seq`s), any failure reported as Unavailable (no decision leaves without its
    audit rows)."""
    try:
        return write_rows(engine, rows)
    except Exception as e:  # noqa: BLE001 -- whatever broke, the answer is 503, never a 500
        log.error("audit write failed", extra={"rows": len(rows), "error": repr(e)})
        raise Unavailable(_unwritten("the decisions were not returned", e), dependency="audit") from None


def _check_version_id(session: Session, tenant_id: str, version_id: str) -> None:
    """NotFound for a `model_version_id` filter naming no version of the tenant: an empty page would read as "no
    decision was made with it" (an auditor filtering by `clinic@1`, not an id, got exactly that)."""
    found = session.scalar(
        select(ModelVersion.id).where(ModelVersion.id == version_id, ModelVersion.tenant_id == tenant_id)
    )
    if found is None:
        raise NotFound(
            f"model version {version_id!r} not found: model_version_id takes a version's id (mv_...), the `id` "
            "of GET /v1/models/{name}@{version}",
            details=[{"field": "query.model_version_id", "message": "no version of this tenant has this id"}],
        )


def list_records(
    session: Session,
    tenant_id: str,
    *,
    model_version_id: str | None = None,
    input_digest: str | None = None,
    seq: int | None = None,
    before_seq: int | None = None,
    limit: int,
) -> list[dict[str, Any]]:
    """The tenant's audit records, newest first, optionally filtered (page backwards with `before_seq`); a row
    changed outside the service into values its columns cannot hold is listed too (`audit_read.decode`)."""
    q = select(*audit_read.COLUMNS).where(AuditRecord.tenant_id == tenant_id)
    if model_version_id:
        _check_version_id(session, tenant_id, model_version_id)
        q = q.where(AuditRecord.model_version_id == model_version_id)
    if input_digest:
        q = q.where(AuditRecord.input_digest == input_digest)
    if seq is not None:
        q = q.where(AuditRecord.seq == seq)
    if before_seq is not None:
        q = q.where(AuditRecord.seq < before_seq)
    # newest first by `seq`, the chain's order: on the (tenant_id, seq) index, read backwards; `ORDER BY id`
    # sorted every row of the tenant first (a probe: 1.1 s for one record of 700,000)
    rows = session.execute(q.order_by(AuditRecord.seq.desc()).limit(limit)).mappings()
    parse_time = audit_read.time_parser(session.get_bind().dialect)
    return [audit_read.decode(m, parse_time) for m in rows]
