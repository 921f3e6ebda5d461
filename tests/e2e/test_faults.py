"""The short version of benchmarks/faults.py: each fault for a few seconds, under load, with jobs queued.

Its own PostgreSQL (initdb/pg_ctl) and Redis on free ports, never the shared ones; uvicorn and a
`celery worker` in distributed mode with short timers. Per fault: no answer 5xx other than 503, no
connection error or reconnect, every job finished, one audit row per decision answered 200.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from benchmarks.faultlab.cluster import HEART, Cluster, heart_records, prepare_model
from benchmarks.faultlab.scenarios import FAULTS, FaultRow, Plan, run_fault, table
from benchmarks.faultlab.servers import pg_bin
from benchmarks.faults import FAST_TIMERS
from tests.conftest import skip_unless_ci

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

PLAN = Plan(outage_s=3.0, clients=2, jobs=2, epochs=100, settle_s=1.0, jobs_timeout_s=90.0)


@dataclass(frozen=True)
class Served:
    """The cluster, the dataset its jobs train on and the reference predictions go to."""

    cluster: Cluster
    dataset_id: str
    ref: str


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """A private distributed service with a trained model behind `heart@production`."""
    try:
        pg_bin("initdb")
    except FileNotFoundError as e:
        skip_unless_ci(str(e))
    if shutil.which("redis-server") is None:
        skip_unless_ci("redis-server not installed")
    if not HEART.exists():
        skip_unless_ci(f"shared dataset missing: {HEART}")
    c = Cluster(tmp_path_factory.mktemp("faults"), {"NEURULES_LOG_LEVEL": "INFO", **FAST_TIMERS})
    try:
        yield Served(c, *prepare_model(c, PLAN.epochs))
    finally:
        c.close()


def check(row: FaultRow, cluster: Cluster) -> None:
    """The targets of every fault."""
    t = row.load
    context = f"\n{table([row])}\nstatuses {dict(t.statuses)} errors {dict(t.transport_errors)} jobs {row.states}"
    assert t.other_5xx() == 0, context
    assert sum(t.transport_errors.values()) == 0 and t.dropped == 0, context
    assert row.jobs_not_done == 0, context + cluster.logs()
    assert row.audit_rows == t.decisions_2xx > 0, context
    assert row.ready_s < 30, context


@pytest.mark.parametrize("fault", list(FAULTS))
def test_fault(served: Served, fault: str) -> None:
    row = run_fault(served.cluster, FAULTS[fault], PLAN, served.dataset_id, served.ref, heart_records())
    print(table([row]))
    check(row, served.cluster)
    if fault == "postgresql":  # the outage was seen, as 503s naming the database or the audit store
        assert row.load.statuses[503] > 0, table([row])
    with served.cluster.client() as c:  # the replacement (or surviving) worker is live again
        assert c.get("/readyz").json()["workers"]["live"] >= 1
