"""Where predict.csv's time goes, in process: the service's CsvBatch on a heart-like file, stage by stage.

    python benchmarks/predict_csv_inprocess.py --rows 1000000              # SQLite (a temporary file)
    python benchmarks/predict_csv_inprocess.py --rows 1000000 --pg URL     # a fresh database on PostgreSQL
    python benchmarks/predict_csv_inprocess.py --rows 200000 --profile     # and cProfile's top functions

No HTTP: `CsvBatch.check` (parse and type, spill) then `next_chunk` until the end (decide, audit
rows committed, answer text), the same calls the endpoint makes off the event loop. Prints the
wall and CPU seconds of each stage and the rows/s of the whole.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving import heart_table, ten_rule_list, write_batch_file


class Stages:
    """Wall and process CPU seconds accumulated per stage name."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def timed(self, name: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call fn, adding its time to the stage."""
        w, c = time.perf_counter(), time.process_time()
        out = fn(*args, **kwargs)
        self.wall[name] = self.wall.get(name, 0.0) + time.perf_counter() - w
        self.cpu[name] = self.cpu.get(name, 0.0) + time.process_time() - c
        return out


def setup(url: str) -> tuple[Any, Any, Any]:
    """A migrated database with one tenant and key: (engine, principal-like caller, tenant id)."""
    from app.admin import create_key, create_tenant, migrate
    from app.db import make_engine

    migrate(url)
    tenant = create_tenant(url, "bench")
    key_id, _ = create_key(url, "bench")

    class Caller:
        tenant_id = tenant

    Caller.key_id = key_id  # type: ignore[attr-defined]
    return make_engine(url), Caller, tenant


def run(url: str, csv_path: Path, rl: Any) -> tuple[Stages, int]:
    """One predict.csv through CsvBatch, timed per stage; (stages, rows answered)."""
    from app.services import audit
    from app.services.predictions import CsvBatch
    from app.services.serving import ServedModel

    engine, caller, tenant = setup(url)
    model = ServedModel.build("mv_bench", tenant, "bench", 1, rl.to_dict())
    st = Stages()
    rows = 0
    with open(csv_path, "rb") as fh:
        b = st.timed(
            "check (parse, type, spill)", CsvBatch.check, engine, caller, model, fh, max_rows=10**8, ignore_extra=False
        )
    st.timed("header", b.header)
    chunks = b.checked.chunks()
    while (chunk := st.timed("read spill", next, chunks, None)) is not None:
        ids, cols = st.timed("decide (apply, digests, columns)", b.scorer.decide, chunk)
        audit_rows = audit.ColumnRows(cols)
        seqs = st.timed("audit (link, insert, commit)", audit.write_rows_or_unavailable, engine, audit_rows)
        rows += st.timed("answer text", b.scorer.text, chunk, ids, seqs).count("\n")
    b.close()
    engine.dispose()
    return st, rows


def main() -> None:
    """Build the file, run it, print the stages."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--pg", help="a PostgreSQL admin URL: a fresh database is created on it and dropped")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    names, X, y = heart_table()
    rl = ten_rule_list(names, X, y)
    with tempfile.TemporaryDirectory(prefix="neurules-csvbench-") as tmp:
        csv_path = Path(tmp) / "batch.csv"
        write_batch_file(csv_path, names, X, args.rows)
        drop = None
        if args.pg:
            import uuid

            from sqlalchemy import create_engine, text

            admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
            db = f"neurules_csvbench_{uuid.uuid4().hex[:8]}"
            with admin.connect() as c:
                c.execute(text(f'CREATE DATABASE "{db}"'))
            url = args.pg.rsplit("/", 1)[0] + f"/{db}"

            def drop() -> None:
                with admin.connect() as c:
                    c.execute(text(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)'))
        else:
            url = f"sqlite:///{tmp}/bench.sqlite3"
        prof = cProfile.Profile() if args.profile else None
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            if prof:
                prof.enable()
            st, rows = run(url, csv_path, rl)
            if prof:
                prof.disable()
        finally:
            if drop:
                drop()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"{rows:,} rows in {wall:.2f} s wall ({cpu:.2f} s CPU) = {rows / wall:,.0f} rows/s  [{url.split(':')[0]}]")
    for name in st.wall:
        print(f"  {name:36s} {st.wall[name]:7.2f} s wall {st.cpu[name]:7.2f} s CPU")
    if prof:
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
