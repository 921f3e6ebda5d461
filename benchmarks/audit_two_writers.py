"""Two server processes' audit writers on one SQLite file: rows/s committed, FULL sync in the lock or after it.

    python benchmarks/audit_two_writers.py                      # this disk as it is
    python benchmarks/audit_two_writers.py --slow-sync-us 1000  # every fsync/fdatasync 1 ms slower (a slower disk)

Each of two processes runs `app.services.audit.AuditWriter` with `--requests` concurrent coroutines, each
awaiting the commit of one audit row at a time, for `--seconds`. Modes, alternating over `--rounds`:
- `full-in-lock`: synchronous=FULL as SQLite does it, the log synced inside COMMIT, under the write lock
  (the writer before `app/services/wal_sync.py`);
- `full-deferred`: the writer's connection commits with NORMAL and fdatasyncs the log itself after the lock
  is let go (`app/services/wal_sync.py`, the service's default now);
- `normal`: synchronous=NORMAL, no sync at commits (the floor of what syncing costs).
`--slow-sync-us` runs the processes with `LD_PRELOAD` of a tiny shim (built here with the C compiler) that
sleeps before every fsync/fdatasync, for SQLite's syncs and ours alike.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import queue
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODES = ("full-in-lock", "full-deferred", "normal")
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>
static unsigned delay(void) { const char *s = getenv("SLOW_SYNC_US"); return s ? (unsigned)atoi(s) : 0; }
int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = dlsym(RTLD_NEXT, "fdatasync");
    usleep(delay());
    return real(fd);
}
int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = dlsym(RTLD_NEXT, "fsync");
    usleep(delay());
    return real(fd);
}
"""


def writer_process(path: str, mode: str, seconds: float, requests: int, out: mp.Queue) -> None:
    """One server process's writer: rows committed and CPU seconds, put on `out`."""
    from app.db import make_engine
    from app.services import audit, wal_sync
    from benchmarks.audit_writer import request_rows  # one request's audit row, as the service builds it

    if mode == "full-in-lock":
        wal_sync.defer_sync = lambda conn: None  # type: ignore[assignment]  # SQLite's own FULL
    engine = make_engine(f"sqlite:///{path}", "normal" if mode == "normal" else "full")
    writer = audit.AuditWriter(engine)

    async def client(stop: float, tag: int) -> int:
        n = 0
        while time.monotonic() < stop:
            await writer.write(request_rows(tag * 10_000_000 + n, 1, 1))
            n += 1
        return n

    async def run() -> int:
        stop = time.monotonic() + seconds
        return sum(await asyncio.gather(*(client(stop, i) for i in range(requests))))

    cpu = time.process_time()
    n = asyncio.run(run())
    out.put((n, time.process_time() - cpu))
    writer.close()
    engine.dispose()


def fresh_database(folder: Path, mode: str) -> str:
    """A new SQLite file with the service's tables."""
    from app.db import make_engine
    from app.tables import Base

    path = folder / f"{mode}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    engine = make_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    engine.dispose()
    return str(path)


def measure(folder: Path, mode: str, args: argparse.Namespace) -> tuple[float, list[float]]:
    """rows/s of the two processes together, and each one's CPU seconds."""
    path = fresh_database(folder, mode)
    ctx = mp.get_context("spawn")  # a fresh interpreter each: LD_PRELOAD and the mode apply from the start
    out = ctx.Queue()
    procs = [ctx.Process(target=writer_process, args=(path, mode, args.seconds, args.requests, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        try:
            results.append(out.get(timeout=args.seconds + 60))
        except queue.Empty:
            codes = [p.exitcode for p in procs]
            for p in procs:
                p.kill()
            raise SystemExit(f"{mode}: a writer process gave no result (exit codes {codes})") from None
    for p in procs:
        p.join()
    return sum(n for n, _ in results) / args.seconds, [cpu for _, cpu in results]


def build_shim() -> Path:
    """The slow-sync shim as a shared library (in the temporary folder, kept for the process started with it)."""
    folder = Path(tempfile.gettempdir())
    src, lib = folder / "neurules_slow_sync.c", folder / "neurules_slow_sync.so"
    src.write_text(SHIM)
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(lib), str(src), "-ldl"], check=True)
    return lib


def main() -> None:
    """Print rows/s per mode and round."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--requests", type=int, default=16, help="concurrent requests per process")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--slow-sync-us", type=int, default=0)
    args = ap.parse_args()
    if args.slow_sync_us and os.environ.get("SLOW_SYNC_US") != str(args.slow_sync_us):
        env = {**os.environ, "LD_PRELOAD": str(build_shim()), "SLOW_SYNC_US": str(args.slow_sync_us)}
        os.execve(sys.executable, [sys.executable, *sys.argv], env)  # again, with the shim loaded
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        print(f"load average before: {os.getloadavg()}; every sync {args.slow_sync_us} us slower")
        print("| round | mode | rows/s (2 processes) | CPU s per process |")
        print("|---|---|---:|---|")
        for r in range(1, args.rounds + 1):
            for mode in MODES:
                rate, cpu = measure(folder, mode, args)
                print(f"| {r} | {mode} | {rate:,.0f} | {' / '.join(f'{c:.2f}' for c in cpu)} |", flush=True)
        print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
