"""The audit writer's own transaction for a one-row batch (chain link, INSERT, head update, commit), on SQLite.

    python benchmarks/writer_transaction.py                                  # this checkout, synchronous=normal
    python benchmarks/writer_transaction.py --root /tmp/old --sync full      # another checkout's service

No thread hand-offs and no checkpoint thread: `append_rows` and the commit, timed in a loop on a fresh
database (the first 500 batches are a warm-up). Prints p50, p90 and p99 in microseconds. Compare checkouts
in alternating runs: absolute figures move 2x between hours on a shared VM.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    """Time the batches and print one line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=HERE.parent, help="the checkout whose app/ is measured")
    ap.add_argument("--sync", choices=("full", "normal"), default="normal")
    ap.add_argument("--n", type=int, default=3000)
    args = ap.parse_args()
    sys.path.insert(0, str(args.root.resolve()))
    from app.db import make_engine
    from app.services import audit
    from app.tables import Base
    from tests.app.test_audit_chain import plain_rows

    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/audit.db", args.sync)
        Base.metadata.create_all(engine)
        audit.write_rows(engine, plain_rows(1))
        batches = [plain_rows(1, tag=i + 1) for i in range(args.n)]
        times = []
        with engine.connect() as conn:
            for rows in batches:
                t = time.perf_counter()
                trans = conn.begin()
                audit.append_rows(conn, rows)
                trans.commit()
                times.append(time.perf_counter() - t)
        engine.dispose()
    kept = sorted(times[500:])
    q = {f: kept[int(len(kept) * f)] * 1e6 for f in (0.5, 0.9, 0.99)}
    print(
        f"{args.root.resolve().name}: {len(kept)} one-row batches, synchronous={args.sync}: "
        f"p50 {q[0.5]:.0f} us, p90 {q[0.9]:.0f} us, p99 {q[0.99]:.0f} us ({audit.__file__})"
    )


if __name__ == "__main__":
    main()
