"""Audit writer throughput, before and after the hash chain, in one run: rows/s committed.

    python benchmarks/audit_writer.py                       # SQLite, and PostgreSQL when it answers
    python benchmarks/audit_writer.py --pg postgresql+psycopg://postgres@127.0.0.1:5432/postgres

"before" is the writer as it was before the chain (revision 0001: one INSERT per batch, no lock,
no hashing), on a database migrated to 0001; "after" is `app.services.audit.AuditWriter` on a
database at head (one chain-head lock per tenant per batch, a SHA-256 per row). Both run the same
load in alternating rounds in this process: `requests` concurrent coroutines (like requests on
one server process) each awaiting the commit of `rows` audit rows, over `tenants` tenants. The
table shows the median rows/s over the rounds and after/before.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.admin import MIGRATIONS, migrate
from app.db import make_engine
from app.services.audit import AuditWriter

LEGACY = sa.table(  # audit_log as revision 0001 created it
    "audit_log",
    *(sa.column(n) for n in ("created_at", "tenant_id", "api_key_id", "model_version_id", "input_digest")),
    sa.column("output", sa.JSON()),
    sa.column("rule_id"),
)


class BeforeChainWriter(AuditWriter):
    """The group-commit writer as it was before the chain: one plain INSERT per batch."""

    def _write(self, rows: list[dict[str, Any]]) -> list[int]:
        if self._conn is None:
            self._conn = self.engine.connect()
        with self._conn.begin():
            self._conn.execute(sa.insert(LEGACY), [{k: v for k, v in r.items() if k != "missing_filled"} for r in rows])
        return [0] * len(rows)  # no chain then: no place in it


def upgrade_to(url: str, revision: str) -> None:
    """Migrate a database to one revision."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["configure_logging"] = False
    eng = make_engine(url)
    with eng.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    eng.dispose()


def request_rows(i: int, rows: int, tenants: int) -> list[dict[str, Any]]:
    """One request's audit rows (what `audit.audit_rows` builds)."""
    now = datetime.now(UTC)
    return [
        {
            "created_at": now,
            "tenant_id": f"tn_bench_{i % tenants}",
            "api_key_id": "key_bench",
            "model_version_id": "mv_bench",
            "input_digest": f"{i:032x}{j:032x}",
            "output": {"prediction": "high", "probabilities": {"low": 0.0888888888888889, "high": 0.9111111111111111}},
            "rule_id": 1,
            "missing_filled": False,
        }
        for j in range(rows)
    ]


async def load(writer: AuditWriter, n_requests: int, concurrency: int, rows: int, tenants: int) -> float:
    """Rows/s committed by `n_requests` requests, `concurrency` at a time."""
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await writer.write(request_rows(i, rows, tenants))

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n_requests)))
    return n_requests * rows / (time.perf_counter() - t0)


def databases(pg: str | None, tmp: Path) -> list[tuple[str, str, str, Any]]:
    """(backend, before url, after url, cleanup) for SQLite and, if given, PostgreSQL."""
    out: list[tuple[str, str, str, Any]] = [
        ("sqlite", f"sqlite:///{tmp / 'before.sqlite3'}", f"sqlite:///{tmp / 'after.sqlite3'}", lambda: None)
    ]
    if pg:
        admin = sa.create_engine(pg, isolation_level="AUTOCOMMIT")
        names = [f"nr_bench_{uuid.uuid4().hex[:8]}" for _ in range(2)]
        with admin.connect() as c:
            for n in names:
                c.execute(sa.text(f'CREATE DATABASE "{n}"'))

        def drop() -> None:
            with admin.connect() as c:
                for n in names:
                    c.execute(sa.text(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)'))
            admin.dispose()

        base = pg.rsplit("/", 1)[0]
        out.append(("postgresql", f"{base}/{names[0]}", f"{base}/{names[1]}", drop))
    return out


async def bench(
    before_url: str, after_url: str, args: argparse.Namespace, concurrency: int, tenants: int
) -> dict[str, float]:
    """Median rows/s of each writer over alternating rounds."""
    writers = {"before": BeforeChainWriter(make_engine(before_url)), "after": AuditWriter(make_engine(after_url))}
    rates: dict[str, list[float]] = {k: [] for k in writers}
    for w in writers.values():  # warm-up: connections, statement caches, chain heads
        await load(w, 20, concurrency, args.rows, tenants)
    for _ in range(args.rounds):
        for name, w in writers.items():
            rates[name].append(await load(w, args.requests, concurrency, args.rows, tenants))
    for w in writers.values():
        w.close()
        w.engine.dispose()
    return {k: statistics.median(v) for k, v in rates.items()}


def main() -> None:
    """Run the grid and print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres", help="'' to skip")
    p.add_argument("--requests", type=int, default=2000, help="requests per round")
    p.add_argument("--rows", type=int, default=1, help="audit rows per request")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--concurrency", default="1,64")
    p.add_argument("--tenants", default="1,8")
    args = p.parse_args()
    print("| backend | concurrent requests | tenants | rows/request | before rows/s | after rows/s | after/before |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="nr-audit-bench-") as tmp:
        for backend, before_url, after_url, cleanup in databases(args.pg or None, Path(tmp)):
            try:
                upgrade_to(before_url, "0001")
                migrate(after_url)
                for conc in map(int, args.concurrency.split(",")):
                    for tenants in map(int, args.tenants.split(",")):
                        r = asyncio.run(bench(before_url, after_url, args, conc, tenants))
                        print(
                            f"| {backend} | {conc} | {tenants} | {args.rows} | {r['before']:,.0f} | "
                            f"{r['after']:,.0f} | {r['after'] / r['before']:.2f} |",
                            flush=True,
                        )
            finally:
                cleanup()


if __name__ == "__main__":
    main()
