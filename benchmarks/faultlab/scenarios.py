"""The three faults, each under a predict load and with jobs queued, and the table row each one produces."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.faultlab.cluster import Cluster, submit_jobs, wait_jobs
from benchmarks.faultlab.load import PredictLoad, Tally


@dataclass(frozen=True)
class Plan:
    """How hard to push: outage length, load, jobs queued per fault and their size, how long to wait."""

    outage_s: float = 10.0
    clients: int = 3
    jobs: int = 3
    epochs: int = 30
    settle_s: float = 2.0  # load before the fault and after the recovery
    jobs_timeout_s: float = 300.0


@dataclass(frozen=True)
class FaultRow:
    """One fault's measurements."""

    fault: str
    outage_s: float
    load: Tally
    jobs: int
    jobs_not_done: int  # lost (never ran again) or stuck (not finished in time) or failed
    ready_s: float  # from the dependency's return until /readyz is 200 and a prediction answers 200
    jobs_done_s: float  # from the dependency's return until every job queued before the fault finished
    audit_rows: int  # audit rows written while the load ran
    states: dict[str, str]
    reaper: Counter[str]  # what the reaper did meanwhile: jobs re-sent (message lost) or requeued (worker lost)


Submit = Callable[[], list[str]]  # queues the fault's jobs; their ids


@dataclass(frozen=True)
class Fault:
    """A named fault: `inject` queues the jobs and takes a dependency away; `restore` brings it (or a new one) back."""

    name: str
    inject: Callable[[Cluster, Submit], list[str]]
    restore: Callable[[Cluster], None]


def _wait_running(cluster: Cluster, ids: list[str], timeout: float = 120) -> None:
    """Until one of the jobs is training (so the fault hits a job mid-run)."""
    deadline = time.monotonic() + timeout
    with cluster.client() as c:
        while time.monotonic() < deadline:
            for j in ids:
                job = c.get(f"/v1/jobs/{j}").json()
                if job["state"] == "running" and job["progress"]["epoch"] > 0:
                    return
            time.sleep(0.05)
    raise TimeoutError(f"no job started training:\n{cluster.logs()}")


def _stop_database(cluster: Cluster, submit: Submit) -> list[str]:
    # the jobs wait in the queue while the worker is paused, so it receives them while the database is down
    for w in cluster.workers:
        w.kill(signal.SIGSTOP, wait=False)
    ids = submit()
    cluster.pg.stop("fast")
    for w in cluster.workers:
        w.kill(signal.SIGCONT, wait=False)
    return ids


def _kill_broker(cluster: Cluster, submit: Submit) -> list[str]:
    # one job trains, the others wait in Redis: their messages die with it
    ids = submit()
    _wait_running(cluster, ids)
    cluster.redis.kill()
    return ids


def _kill_worker(cluster: Cluster, submit: Submit) -> list[str]:
    ids = submit()
    _wait_running(cluster, ids)
    for w in cluster.workers:
        w.kill()
    return ids


def _replace_worker(cluster: Cluster) -> None:  # a supervisor restarts it at once
    cluster.workers = [cluster.spawn_worker("replacement")]


FAULTS = {
    "postgresql": Fault("PostgreSQL stopped, restarted", _stop_database, lambda c: c.pg.start()),
    "redis": Fault("Redis killed (messages lost), restarted", _kill_broker, lambda c: c.redis.start()),
    "worker": Fault("training worker SIGKILLed mid-job", _kill_worker, _replace_worker),
}


def _until_serving(cluster: Cluster, load: PredictLoad, since: float, timeout: float = 120) -> float:
    """Seconds from `since` until /readyz is 200 and a prediction answered 200 after `since`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if load.read().last_ok > since and cluster.ready():
            return time.monotonic() - since
        time.sleep(0.05)
    return float("inf")


def reaper_actions(log: Path, offset: int) -> Counter[str]:
    """The reaper's actions logged by the API process after byte `offset` of its log."""
    with open(log, "rb") as fh:
        fh.seek(offset)
        lines = fh.read().decode(errors="replace").splitlines()
    out: Counter[str] = Counter()
    for line in lines:
        if '"reaped stale job"' in line:
            with contextlib.suppress(ValueError):
                out[json.loads(line).get("action", "?")] += 1
    return out


def run_fault(cluster: Cluster, fault: Fault, plan: Plan, dataset_id: str, ref: str, records: list) -> FaultRow:
    """Start the load, queue jobs and inject the fault, restore after the outage, measure the recovery."""
    with cluster.client() as c:
        audit_before = cluster.audit_rows()
        log_offset = cluster.api.log_path.stat().st_size
        load = PredictLoad(cluster.url, cluster.key, ref, records, plan.clients).start()
        time.sleep(plan.settle_s)
        jobs = fault.inject(cluster, lambda: submit_jobs(c, dataset_id, plan.jobs, plan.epochs))
        time.sleep(plan.outage_s)
        fault.restore(cluster)
        back = time.monotonic()
        ready_s = _until_serving(cluster, load, back)
        states = wait_jobs(c, jobs, plan.jobs_timeout_s)
        jobs_done_s = time.monotonic() - back
        time.sleep(plan.settle_s)
        tally = load.stop()
    return FaultRow(
        fault=fault.name,
        outage_s=plan.outage_s,
        load=tally,
        jobs=len(jobs),
        jobs_not_done=sum(1 for j in jobs if states.get(j) != "succeeded"),
        ready_s=ready_s,
        jobs_done_s=jobs_done_s,
        audit_rows=cluster.audit_rows() - audit_before,
        states=states,
        reaper=reaper_actions(cluster.api.log_path, log_offset),
    )


HEADER = (
    "| fault | outage s | requests | 200 | 503 | other 5xx | conn. errors | conn. dropped | jobs | lost/stuck "
    "| reaper re-sent / requeued | s to serve | s to jobs done | audit rows | decisions 200 |"
)


def table(rows: list[FaultRow]) -> str:
    """The results as one Markdown table."""
    lines = [HEADER, "|" + "---|" * 15]
    for r in rows:
        t = r.load
        lines.append(
            f"| {r.fault} | {r.outage_s:.0f} | {sum(t.statuses.values())} | {t.statuses[200]} | {t.statuses[503]} "
            f"| {t.other_5xx()} | {sum(t.transport_errors.values())} | {t.dropped} | {r.jobs} | {r.jobs_not_done} "
            f"| {r.reaper['resent']} / {r.reaper['requeued']} | {r.ready_s:.1f} | {r.jobs_done_s:.1f} "
            f"| {r.audit_rows} | {t.decisions_2xx} |"
        )
    return "\n".join(lines)
