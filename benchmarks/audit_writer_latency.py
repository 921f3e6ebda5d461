"""Latency and CPU of one-row audit writes at concurrency 1, through the group-commit AuditWriter (SQLite).

    python benchmarks/audit_writer_latency.py --n 4000                        # this checkout
    python benchmarks/audit_writer_latency.py --root /tmp/old --n 4000        # another checkout's service
    python benchmarks/audit_writer_latency.py --wal-autocheckpoint 200         # SQLite's checkpoint every 200 pages

Each write is awaited before the next (as one request at a time at c=1): the loop -> writer thread ->
loop hand-off, the chain link, the INSERT and the commit. Prints p50, p99, p99.9 and the largest
latency, and the process CPU per write (all threads). A fresh migrated database in a temporary folder.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Run the writes and print one line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=HERE.parent, help="the checkout whose app/ is measured")
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--wal-autocheckpoint", type=int, default=None, help="pages (SQLite's default 1000)")
    args = ap.parse_args()
    sys.path[:0] = [str(args.root), str(HERE)]
    from audit_writer import request_rows
    from sqlalchemy import event

    from app.admin import migrate
    from app.db import make_engine
    from app.services.audit import AuditWriter

    with tempfile.TemporaryDirectory(prefix="nr-writer-latency-") as tmp:
        url = f"sqlite:///{tmp}/audit.sqlite3"
        migrate(url)
        engine = make_engine(url)
        if args.wal_autocheckpoint is not None:
            event.listen(
                engine,
                "connect",
                lambda dbapi, _: dbapi.execute(f"PRAGMA wal_autocheckpoint={args.wal_autocheckpoint}"),
            )

        async def run() -> tuple[list[float], float]:
            writer = AuditWriter(engine)
            for i in range(200):  # warm-up: the thread, the connection, the compiled statements
                await writer.write(request_rows(i, 1, 1))
            lat, cpu0 = [], time.process_time()
            for i in range(args.n):
                t0 = time.perf_counter()
                await writer.write(request_rows(i, 1, 1))
                lat.append(time.perf_counter() - t0)
            cpu = time.process_time() - cpu0
            writer.close()
            return sorted(lat), cpu

        lat, cpu = asyncio.run(run())
    q = {p: lat[int(p * (len(lat) - 1))] * 1e6 for p in (0.5, 0.99, 0.999)}
    print(
        f"{args.root.name}: {args.n} one-row writes, wal_autocheckpoint {args.wal_autocheckpoint or 'default'}: "
        f"p50 {q[0.5]:.0f} us, p99 {q[0.99]:.0f} us, p99.9 {q[0.999]:.0f} us, max {lat[-1] * 1e6:.0f} us, "
        f"CPU per write {cpu / args.n * 1e6:.0f} us"
    )


if __name__ == "__main__":
    main()
