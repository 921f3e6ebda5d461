"""Fault benchmark: PostgreSQL stopped and restarted, Redis killed and restarted, the training worker SIGKILLed.

    python benchmarks/faults.py                 # the service's default timers, 10 s outages
    python benchmarks/faults.py --outage-s 3 --timers fast --epochs 5 --jobs 2   # the test suite's short version

Each fault runs against a private cluster (its own PostgreSQL via initdb/pg_ctl and its own redis-server,
on free ports, in temporary folders; uvicorn and a `celery worker` in distributed mode), under a bounded
predict load (keep-alive clients predicting by alias) and with jobs queued. One table: requests answered
5xx other than 503 (target 0), connection errors and dropped connections (target 0), jobs lost or stuck (target 0),
seconds until the service serves again and until every queued job finished, and audit rows against
decisions answered 200 (equal).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.faultlab.cluster import Cluster, heart_records, prepare_model
from benchmarks.faultlab.scenarios import FAULTS, FaultRow, Plan, run_fault, table

# short timers for the test suite: heartbeats every second, a worker dead after 4 s, a sweep every second
FAST_TIMERS = {
    "NEURULES_HEARTBEAT_INTERVAL_S": "1",
    "NEURULES_STALE_AFTER_S": "4",
    "NEURULES_REAPER_INTERVAL_S": "1",
    "NEURULES_LOST_MESSAGE_GRACE_S": "2",
    "NEURULES_PROGRESS_EVERY_EPOCHS": "1",
}


def run(plan: Plan, faults: list[str], timers: dict[str, str], folder: Path) -> tuple[list[FaultRow], Cluster]:
    """Start a cluster, train the served model, run each fault in turn; the rows (and the closed cluster)."""
    cluster = Cluster(folder, {"NEURULES_LOG_LEVEL": "INFO", **timers})
    try:
        dataset_id, ref = prepare_model(cluster, plan.epochs)
        records = heart_records()
        rows = []
        for f in faults:
            rows.append(run_fault(cluster, FAULTS[f], plan, dataset_id, ref, records))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    except BaseException:
        print(cluster.logs(), file=sys.stderr)
        raise
    finally:
        cluster.close()
    return rows, cluster


def machine() -> str:
    """The machine's state, for the record."""
    load = os.getloadavg()
    return f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through the cleanup, so no server outlives the run


def main() -> None:
    """Parse arguments, run, print the table."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # set even where a shell left SIGINT ignored
        signal.signal(sig, _exit_on_signal)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--outage-s", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=3, help="jobs queued before each fault")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--jobs-timeout-s", type=float, default=300.0, help="wait this long for the jobs after a fault")
    ap.add_argument("--timers", choices=["default", "fast"], default="default")
    ap.add_argument("--faults", nargs="+", choices=list(FAULTS), default=list(FAULTS))
    ap.add_argument("--logs", type=Path, help="keep the processes' logs in this folder")
    args = ap.parse_args()
    plan = Plan(
        outage_s=args.outage_s,
        clients=args.clients,
        jobs=args.jobs,
        epochs=args.epochs,
        jobs_timeout_s=args.jobs_timeout_s,
    )
    print(f"machine before: {machine()}", flush=True)
    t0 = time.monotonic()
    timers = FAST_TIMERS if args.timers == "fast" else {}
    if args.logs:
        args.logs.mkdir(parents=True, exist_ok=True)
        rows, _ = run(plan, args.faults, timers, args.logs)
    else:
        with tempfile.TemporaryDirectory(prefix="neurules-faults-") as tmp:
            rows, _ = run(plan, args.faults, timers, Path(tmp))
    print(f"machine after: {machine()}; {time.monotonic() - t0:.0f} s in all")
    print(f"plan: {plan}, timers: {args.timers}\n")
    print(table(rows))
    for r in rows:
        print(f"{r.fault}: statuses {dict(r.load.statuses)}, transport errors {dict(r.load.transport_errors)}")


if __name__ == "__main__":
    main()
