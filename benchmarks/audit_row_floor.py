"""The storage floor under predict.csv: what writing one decision's audit row costs, before anything else.

    python benchmarks/audit_row_floor.py                  # 100,000 rows per transaction, SQLite (the service's pragmas)
    python benchmarks/audit_row_floor.py --rows 50000 --sync normal

Issue 9 asks predict.csv for 250,000 rows/s end to end: 4 us a row for upload, parsing, rules,
explanation, audit and answer together. Every decision is one `audit_log` row (~350 bytes, two
indexes) whose hash extends its tenant's chain. This measures, on a migrated database of the
service's own schema, the parts of that row no change to our Python can remove, each as the best of
--repeats transactions of --rows rows shaped like a heart CSV chunk's:
- `driver insert`: sqlite3's `executemany` of ready tuples plus the commit (the SQLite floor);
- `service insert`: `audit.insert_columns` (values converted for the driver, then the same executemany);
- `chain`: `audit_chain.link_columns` (canonical bodies and one SHA-256 per row, sequential).
If `driver insert` alone is above 4 us a row, 250,000 rows/s cannot be reached with a row per decision.
"""

from __future__ import annotations

import argparse
import hashlib
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BUDGET_US = 1e6 / 250_000  # issue 9's whole per-row budget


def chunk_columns(n: int, first_seq: int) -> dict[str, list[Any]]:
    """Audit columns of `n` decisions as a CSV chunk gives them: one time, tenant, key and version; a few outputs."""
    from app.tables import utcnow

    outputs = [{"prediction": str(k % 2), "probabilities": {"0": 0.1 * k, "1": 1 - 0.1 * k}} for k in range(10)]
    return {
        "created_at": [utcnow()] * n,
        "tenant_id": ["t_" + "a" * 30] * n,
        "api_key_id": ["k_" + "b" * 30] * n,
        "model_version_id": ["mv_" + "c" * 29] * n,
        "input_digest": [hashlib.sha256(str(first_seq + i).encode()).hexdigest() for i in range(n)],
        "output": [outputs[i % 10] for i in range(n)],
        "rule_id": [i % 10 for i in range(n)],
        "missing_filled": [False] * n,
    }


def best_of(repeats: int, fn: Any) -> float:
    """Fewest seconds of `repeats` calls of fn(k)."""
    best = float("inf")
    for k in range(repeats):
        t = time.perf_counter()
        fn(k)
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    """Migrate a temporary database, time the three parts, print microseconds a row against the budget."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sync", choices=["full", "normal"], default="full")
    args = ap.parse_args()
    from app.admin import migrate
    from app.db import make_engine
    from app.services import audit
    from app.services.audit_chain import START, link_columns

    n = args.rows
    with tempfile.TemporaryDirectory(prefix="neurules-rowfloor-") as tmp:
        url = f"sqlite:///{tmp}/floor.sqlite3"
        migrate(url)
        engine = make_engine(url, args.sync)
        seq = [0]

        def chained(k: int) -> dict[str, list[Any]]:
            cols = chunk_columns(n, seq[0])
            links = link_columns(cols, n, START)
            seq[0] += n
            chain: dict[str, list[Any]] = {
                "seq": [s + seq[0] for s in links.seq],
                "prev_hash": links.prev_hash,
                "row_hash": links.row_hash,
            }
            return {**cols, **chain}

        def service_insert(k: int) -> None:
            cols = prepared[k]
            with engine.begin() as conn:
                audit.insert_columns(conn, cols)

        prepared = [chained(k) for k in range(args.repeats)]
        t_service = best_of(args.repeats, service_insert)
        names = list(prepared[0])
        raw = sqlite3.connect(f"{tmp}/floor.sqlite3", isolation_level=None)
        raw.execute(f"PRAGMA synchronous={args.sync.upper()}")
        sql = f"INSERT INTO audit_log ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        tuples = []
        for _ in range(args.repeats):
            cols = chained(0)
            cols["created_at"] = [str(v) for v in cols["created_at"]]
            cols["output"] = ['{"prediction":"1","probabilities":{"0":0.2,"1":0.8}}'] * n
            tuples.append(list(zip(*(cols[c] for c in names), strict=True)))

        def driver_insert(k: int) -> None:
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany(sql, tuples[k])
            raw.execute("COMMIT")

        t_driver = best_of(args.repeats, driver_insert)
        cols = chunk_columns(n, 0)
        t_chain = best_of(args.repeats, lambda k: link_columns(cols, n, START))
        raw.close()
        engine.dispose()
    print(f"{n:,} audit rows per transaction, SQLite synchronous={args.sync}, best of {args.repeats}:")
    for name, secs in (("driver insert", t_driver), ("service insert", t_service), ("chain", t_chain)):
        print(f"  {name:16s} {secs / n * 1e6:6.2f} us/row")
    floor = (t_driver + t_chain) / n * 1e6
    verdict = "above" if floor > BUDGET_US else "within"
    print(f"  driver insert + chain {floor:.2f} us/row: {verdict} the {BUDGET_US:.2f} us/row of 250,000 rows/s")


if __name__ == "__main__":
    main()
