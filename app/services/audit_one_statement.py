"""A small one-tenant audit batch on PostgreSQL in one statement: one round trip instead of five.

The transactional path (`app.services.audit.append_rows`) sends BEGIN, locks the chain head, inserts,
moves the head and commits: five round trips, each with psycopg's and SQLAlchemy's work around it,
paid once per request when requests come one at a time. Here one statement, run in autocommit (so it
is its own transaction), locks the head, links the rows, inserts them and moves the head.

The rows' canonical bodies are built in Python (`audit_chain.canonical_bodies`); the chain hashes are
computed by PostgreSQL's `sha256` over exactly the text `audit_chain.row_hash` hashes (the bodies are
ASCII JSON), and the verifier checks every row with the Python function (tests/app/test_audit_one_statement.py).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg import Connection as PgConnection

from app.services.audit_chain import HASH_PREFIX, canonical_bodies
from app.tables import AuditChainHead, AuditRecord, utcnow

MAX_ROWS = 64  # above this the transactional path (a recursive step per row reads the bodies array)

# the audit row's columns the statement fills from arrays, with their element types
_COLUMNS = (
    ("created_at", "timestamptz"),
    ("api_key_id", "text"),
    ("model_version_id", "text"),
    ("input_digest", "text"),
    ("output", "text"),  # JSON text, cast to json on insert (kept as sent)
    ("rule_id", "int"),
    ("missing_filled", "bool"),
)


COLUMNS = tuple(name for name, _ in _COLUMNS)


@functools.cache
def statement() -> str:
    """The statement: lock the head, link the rows after it (hashes in SQL), insert them, move the head.

    It returns the head's seq before the batch, or no row when the tenant has no head (nothing is written).
    """
    log, heads = AuditRecord.__tablename__, AuditChainHead.__tablename__
    # arrays in binary: psycopg's text format escapes each element with a regex (~60 us a row; binary ~3)
    arrays = ", ".join(f"%({name})b::{kind}[]" for name, kind in _COLUMNS)
    fields = ", ".join(f"u.{name}" + ("::json" if name == "output" else "") for name, _ in _COLUMNS)
    names = ", ".join(COLUMNS)
    return f"""
WITH RECURSIVE
head AS (SELECT seq, row_hash FROM {heads} WHERE tenant_id = %(tenant)s FOR UPDATE),
chain(i, seq, h) AS (
    SELECT 0::bigint, seq, row_hash::text FROM head
    UNION ALL
    SELECT c.i + 1, c.seq + 1, encode(sha256(convert_to(
        %(prefix)s || (c.seq + 1)::text || E'\\n' || c.h || E'\\n' || (%(bodies)b::text[])[c.i + 1], 'UTF8')), 'hex')
    FROM chain AS c WHERE c.i < %(n)s
),
inserted AS (
    INSERT INTO {log} (tenant_id, {names}, seq, prev_hash, row_hash)
    SELECT %(tenant)s, {fields}, c.seq, p.h, c.h
    FROM unnest({arrays}) WITH ORDINALITY AS u({names}, i)
    JOIN chain AS c ON c.i = u.i JOIN chain AS p ON p.i = u.i - 1
),
moved AS (
    UPDATE {heads} SET seq = last.seq, row_hash = last.h, updated_at = %(at)s
    FROM (SELECT seq, h FROM chain ORDER BY i DESC LIMIT 1) AS last WHERE tenant_id = %(tenant)s
)
SELECT seq FROM head"""


def fits(columns: dict[str, list[Any]]) -> bool:
    """Whether a batch (column-wise) goes by one statement: one tenant, 1 to MAX_ROWS rows."""
    tenants = columns["tenant_id"]
    return 0 < len(tenants) <= MAX_ROWS and tenants.count(tenants[0]) == len(tenants)


def append(raw: PgConnection[Any], columns: dict[str, list[Any]], bound: dict[str, list[Any]]) -> list[int] | None:
    """Append one tenant's rows as one autocommitted statement; their seqs, or None when the head is missing.

    `columns` are the rows as the service built them (their canonical bodies are hashed); `bound` holds
    each of COLUMNS as the transactional path would bind it (times in UTC, `output` as JSON text). The
    connection must not be in a transaction.
    """
    n = len(columns["tenant_id"])
    params: dict[str, Any] = dict(bound)  # exactly COLUMNS
    params.update(
        tenant=columns["tenant_id"][0], prefix=f"{HASH_PREFIX}\n", bodies=canonical_bodies(columns, n), n=n, at=utcnow()
    )
    before, raw.autocommit = raw.autocommit, True
    try:
        with raw.cursor() as cur:
            cur.execute(statement(), params, prepare=True)
            row = cur.fetchone()
    finally:
        if not raw.closed:
            raw.autocommit = before
    return None if row is None else list(range(row[0] + 1, row[0] + n + 1))


@dataclass(frozen=True)
class Backend:
    """A PostgreSQL server process: its pid, and when it started (a pid alone may be reused)."""

    pid: int
    started: datetime


_MY_BACKEND = "SELECT pid, backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
_END_BACKEND = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = %s AND backend_start = %s"
_BACKEND_ALIVE = "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND backend_start = %s"
END_WAIT_S = 5.0  # how long to wait for a broken connection's server process to go


def backend_of(raw: PgConnection[Any], info: dict[str, Any]) -> Backend:
    """The connection's server process, read once per connection (`info`: the pool's per-connection dict)."""
    if "pg_backend" not in info:
        row = raw.execute(_MY_BACKEND).fetchone()
        raw.rollback()
        if row is None:
            raise RuntimeError("this connection's own process is not in pg_stat_activity")
        info["pg_backend"] = Backend(*row)
    backend: Backend = info["pg_backend"]
    return backend


class StillRunning(RuntimeError):
    """A broken connection's server process could not be ended: whether its statement commits is unknown."""


def end_backend(raw: PgConnection[Any], backend: Backend) -> None:
    """End a broken connection's server process and wait until it is gone, so its statement can no longer commit.

    The client seeing a connection break does not stop the server: a statement already sent may still be
    waiting for the head's lock and commit later. StillRunning when it is still there after END_WAIT_S.
    """
    key = (backend.pid, backend.started)
    deadline = time.monotonic() + END_WAIT_S
    raw.execute(_END_BACKEND, key)
    raw.rollback()  # pg_stat_activity is read once per transaction: each look below is a transaction of its own
    while raw.execute(_BACKEND_ALIVE, key).fetchone() is not None:
        raw.rollback()
        if time.monotonic() > deadline:
            raise StillRunning(f"PostgreSQL process {backend.pid} did not end within {END_WAIT_S} s")
        time.sleep(0.01)
    raw.rollback()


_FIND_FIRST = (
    f"SELECT seq FROM {AuditRecord.__tablename__} WHERE tenant_id = %s AND created_at = %s AND input_digest = %s "
    "AND api_key_id = %s AND model_version_id = %s ORDER BY seq LIMIT 1"
)
_DIGESTS = (
    f"SELECT input_digest FROM {AuditRecord.__tablename__} WHERE tenant_id = %s AND seq >= %s AND seq < %s ORDER BY seq"
)


def committed_seqs(raw: PgConnection[Any], columns: dict[str, list[Any]], created_at: datetime) -> list[int] | None:
    """After `end_backend` on the broken connection's process: the rows' seqs if its statement committed, else None.

    The statement is atomic, so its rows are either all there, one after another in the chain, or none
    is. The first is found by its request's time (`created_at`, as bound), input digest, key and version
    (a request's rows share its time, taken to the microsecond: the earliest match is the batch's first
    row), and the rows from it must carry the batch's digests in order.
    """
    tenant, n = columns["tenant_id"][0], len(columns["tenant_id"])
    key = [tenant, created_at, columns["input_digest"][0], columns["api_key_id"][0], columns["model_version_id"][0]]
    with raw.cursor() as cur:
        first = cur.execute(_FIND_FIRST, key).fetchone()
        digests = [] if first is None else [d for (d,) in cur.execute(_DIGESTS, (tenant, first[0], first[0] + n))]
    raw.rollback()
    if first is None or digests != list(columns["input_digest"]):
        return None
    return list(range(first[0], first[0] + n))
