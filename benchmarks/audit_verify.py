"""Audit chain verification at scale: rows/s and peak memory of `verify-audit` over one large chain.

    python benchmarks/audit_verify.py --rows 1000000            # PostgreSQL (a scratch database)
    python benchmarks/audit_verify.py --rows 1000000 --sqlite   # SQLite (a temporary file)

Fills one tenant's chain with `--rows` rows through the service's own chained insert
(`app.services.audit.append_rows`, 10,000 rows per transaction), then runs the verifier twice:
on the intact chain, and after changing the last-but-one row as the owner (the break must be
found there, at the end of the chain). Prints a table with the fill rate, the verify rates and the
peak resident memory of the process after the fill and after both verifications (streaming: the
verifier holds one page of rows, so the second figure does not grow with --rows).
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.admin import migrate
from app.db import Database
from app.services import audit, audit_verify

CHUNK = 10_000


def fill(db: Database, tenant: str, n: int) -> float:
    """Append n chained rows for one tenant; rows/s."""
    t0 = time.perf_counter()
    for start in range(0, n, CHUNK):
        now = datetime.now(UTC)
        rows = [
            {
                "created_at": now,
                "tenant_id": tenant,
                "api_key_id": "key_bench",
                "model_version_id": "mv_bench",
                "input_digest": f"{i:064x}",
                "output": {"prediction": i % 2, "probabilities": {"0": 0.25, "1": 0.75}},
                "rule_id": i % 7,
                "missing_filled": i % 5 == 0,
            }
            for i in range(start, min(n, start + CHUNK))
        ]
        audit.write_rows(db.engine, rows)
    return n / (time.perf_counter() - t0)


def peak_rss_mib() -> float:
    """Peak resident memory of this process so far."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed_verify(db: Database, tenant: str) -> tuple[audit_verify.ChainReport, float]:
    """The report and the rows/s of its check."""
    t0 = time.perf_counter()
    with db.sessionmaker() as s:
        report = audit_verify.verify_tenant(s, tenant)
    return report, report.rows_checked / (time.perf_counter() - t0)


def tamper(db: Database, tenant: str) -> int:
    """Change the last-but-one row as the owner (triggers lifted); its id."""
    with db.engine.begin() as c:
        rid = c.execute(
            sa.text("SELECT id FROM audit_log WHERE tenant_id = :t ORDER BY seq DESC LIMIT 1 OFFSET 1"), {"t": tenant}
        ).scalar_one()
        sqlite = c.dialect.name == "sqlite"
        c.execute(
            sa.text("DROP TRIGGER audit_log_no_update" if sqlite else "ALTER TABLE audit_log DISABLE TRIGGER ALL")
        )
        c.execute(sa.text("UPDATE audit_log SET rule_id = rule_id + 1 WHERE id = :i"), {"i": rid})
        if not sqlite:
            c.execute(sa.text("ALTER TABLE audit_log ENABLE TRIGGER ALL"))
    return int(rid)


def main() -> None:
    """Fill, verify, tamper, verify again; print the table."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--sqlite", action="store_true")
    p.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="nr-verify-bench-") as tmp:
        if args.sqlite:
            url, drop = f"sqlite:///{Path(tmp) / 'v.sqlite3'}", None
        else:
            admin = sa.create_engine(args.pg, isolation_level="AUTOCOMMIT")
            name = f"nr_vbench_{uuid.uuid4().hex[:8]}"
            with admin.connect() as c:
                c.execute(sa.text(f'CREATE DATABASE "{name}"'))
            url, drop = f"{args.pg.rsplit('/', 1)[0]}/{name}", name
        try:
            migrate(url)
            db = Database(url)
            fill_rate = fill(db, "tn_big", args.rows)
            rss_fill = peak_rss_mib()
            intact, rate = timed_verify(db, "tn_big")
            victim = tamper(db, "tn_big")
            broken, rate2 = timed_verify(db, "tn_big")
            rss_verify = peak_rss_mib()
            db.dispose()
        finally:
            if drop:
                with admin.connect() as c:
                    c.execute(sa.text(f'DROP DATABASE IF EXISTS "{drop}" WITH (FORCE)'))
                admin.dispose()
    assert intact.intact and intact.rows_checked == args.rows, intact
    assert broken.first_break is not None and broken.first_break.row_id == victim, broken
    backend = "sqlite" if args.sqlite else "postgresql"
    brk = broken.first_break
    print(
        "| backend | rows | fill rows/s | verify rows/s | after tampering | verify rows/s | peak RSS MiB fill, verify |"
    )
    print("|---|---:|---:|---:|---|---:|---|")
    print(
        f"| {backend} | {args.rows:,} | {fill_rate:,.0f} | {rate:,.0f} | {brk.kind} at row {victim} (seq {brk.seq}) "
        f"| {rate2:,.0f} | {rss_fill:,.0f}, {rss_verify:,.0f} |"
    )


if __name__ == "__main__":
    main()
