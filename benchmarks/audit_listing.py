"""`GET /v1/audit`'s query (`audit.list_records`) on a large audit log, against the ordering it replaced.

    .venv/bin/python benchmarks/audit_listing.py --rows 300000

One tenant's `--rows` audit rows are inserted into a fresh SQLite database (migrated as the service migrates it);
then the newest 1 and 100 records are listed with `audit.list_records` (newest first by `seq`, on the
(tenant_id, seq) index) and with the ordering it replaced (`ORDER BY id DESC`, which SQLite sorts in a temporary
B-tree), best of `--repeats`, in milliseconds.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from app.admin import migrate
from app.db import Database
from app.services import audit

INSERT = (
    "INSERT INTO audit_log (created_at, tenant_id, api_key_id, model_version_id, input_digest, output, rule_id, seq, "
    "prev_hash, row_hash, missing_filled) VALUES (?, 't', 'k', 'mv', ?, '{\"prediction\": 1}', 1, ?, ?, ?, 0)"
)


def fill(path: Path, rows: int) -> None:
    """A tenant and `rows` audit rows (seq 1..rows) written straight into the file."""
    with sqlite3.connect(path) as c:
        c.execute("INSERT INTO tenants (id, name, created_at) VALUES ('t', 't', '2026-01-01')")
        zeros = "0" * 64
        c.executemany(INSERT, ((f"2026-01-01 00:00:{i % 60:02d}", zeros, i + 1, zeros, zeros) for i in range(rows)))


def best_ms(action: object, repeats: int) -> float:
    """The fastest of `repeats` calls of `action`, in milliseconds."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return 1000 * min(times)


def main() -> None:
    """Print one line per page size: the service's listing and the old ordering."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp())
    url = f"sqlite:///{folder / 'audit.sqlite3'}"
    migrate(url)
    fill(folder / "audit.sqlite3", args.rows)
    db = Database(url)
    try:
        for limit in (1, 100):
            with db.session() as s:
                newest = audit.list_records(s, "t", limit=limit)[0]["seq"]
                now = best_ms(lambda n=limit: audit.list_records(s, "t", limit=n), args.repeats)
                old_q = text(f"SELECT * FROM audit_log WHERE tenant_id = 't' ORDER BY id DESC LIMIT {limit}")
                old = best_ms(lambda q=old_q: s.execute(q).all(), args.repeats)
            print(
                f"{args.rows} rows, limit {limit}: list_records {now:.1f} ms (newest seq {newest}); "
                f"ORDER BY id DESC {old:.1f} ms"
            )
    finally:
        db.dispose()


if __name__ == "__main__":
    main()
