"""The distributed service on private dependencies: PostgreSQL, Redis, the API (uvicorn) and Celery workers."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from benchmarks.faultlab.servers import BIN, ROOT, PgServer, Proc, RedisServer, free_port
from benchmarks.shared_data import shared_datasets

HEART = shared_datasets() / "heart.csv"
ADMIN = [sys.executable, "-m", "worker.cli"]  # the `neurules-admin` console script's code, from this checkout


def service_env(pg: PgServer, redis: RedisServer, folder: Path, overrides: dict[str, str]) -> dict[str, str]:
    """The environment of every service process: distributed mode on the private servers, no inherited NEURULES_*."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURULES_")}
    env.update(
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(ROOT),
        NEURULES_MODE="distributed",
        NEURULES_DATABASE_URL=pg.url,
        NEURULES_BROKER_URL=redis.url,
        NEURULES_QUEUE=f"nr-faults-{uuid.uuid4().hex[:8]}",
        NEURULES_DATA_DIR=str(folder / "var"),
        NEURULES_ACCESS_LOG="false",
    )
    env.update(overrides)
    return env


class Cluster:
    """A running distributed service with its own PostgreSQL and Redis; one API process, N workers."""

    def __init__(self, folder: Path, overrides: dict[str, str] | None = None, workers: int = 1) -> None:
        self.folder = folder
        self.pg = PgServer()
        self.redis = RedisServer(folder)
        self.env = service_env(self.pg, self.redis, folder, overrides or {})
        self.procs: list[Proc] = []
        try:
            self._admin("migrate")
            self._admin("create-tenant", "faults")
            self.key = self._admin("create-key", "faults")
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.api = self._spawn_api()
            self.workers = [self.spawn_worker(f"w{i}") for i in range(workers)]
            self.wait_ready(90)
        except BaseException:
            self.close()
            raise

    def _admin(self, *args: str) -> str:
        out = subprocess.run(
            [*ADMIN, *args], env=self.env, cwd=self.folder, capture_output=True, text=True, timeout=120
        )
        if out.returncode != 0:
            raise RuntimeError(f"neurules-admin {' '.join(args)}: {out.stderr[-2000:]}")
        return out.stdout.strip()

    def _spawn_api(self) -> Proc:
        args = [str(BIN / "uvicorn"), "worker.service:app", "--host", "127.0.0.1", "--port", str(self.port)]
        p = Proc(
            [*args, "--loop", "uvloop", "--http", "httptools", "--no-access-log"], self.env, self.folder / "api.log"
        )
        self.procs.append(p)
        return p

    def spawn_worker(self, name: str) -> Proc:
        """Start one more `celery worker` process (solo pool) on the training queue."""
        args = [
            str(BIN / "celery"),
            "-A",
            "worker.celery_app",
            "worker",
            "-P",
            "solo",
            "-Q",
            self.env["NEURULES_QUEUE"],
        ]
        args += ["--without-mingle", "--without-gossip", "-l", "INFO", "-n", f"{name}-{uuid.uuid4().hex[:4]}@%h"]
        p = Proc(args, self.env, self.folder / f"worker-{name}.log")
        self.procs.append(p)
        return p

    def client(self) -> httpx.Client:
        """An HTTP client with the tenant's key."""
        return httpx.Client(base_url=self.url, headers={"X-API-Key": self.key}, timeout=60)

    def ready(self) -> bool:
        """Whether /readyz answers 200."""
        try:
            return httpx.get(f"{self.url}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    def wait_ready(self, timeout: float) -> float:
        """Seconds until /readyz answers 200 (TimeoutError with the logs after `timeout`)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if not self.api.alive():
                raise RuntimeError(f"the API process exited:\n{self.logs()}")
            if self.ready():
                return time.monotonic() - t0
            time.sleep(0.1)
        raise TimeoutError(f"not ready after {timeout}s:\n{self.logs()}")

    def audit_rows(self) -> int:
        """Rows in the audit log (read from the database itself)."""
        engine = create_engine(self.pg.url)
        try:
            with engine.connect() as c:
                return int(c.execute(text("SELECT count(*) FROM audit_log")).scalar_one())
        finally:
            engine.dispose()

    def logs(self) -> str:
        """Tails of every process log."""
        return "\n".join(f"--- {p.log_path.name}\n{p.tail()}" for p in self.procs)

    def close(self) -> None:
        """Stop every process and both servers (each one even if stopping another failed)."""
        for stop in [*(p.stop for p in reversed(self.procs)), self.redis.destroy, self.pg.destroy]:
            try:
                stop()
            except Exception as e:  # go on with the others, and say what stayed behind
                print(f"cleanup: {stop}: {e!r}", file=sys.stderr)


def heart_records(n: int = 50) -> list[dict[str, Any]]:
    """The first `n` rows of heart.csv without the target, as JSON records."""
    with open(HEART, newline="") as fh:
        rows = list(csv.DictReader(fh))[:n]
    return [{k: (float(v) if v not in ("", "?") else None) for k, v in r.items() if k != "target"} for r in rows]


def submit_jobs(c: httpx.Client, dataset_id: str, n: int, epochs: int) -> list[str]:
    """Queue `n` training jobs on the dataset; their ids."""
    ids = []
    for _ in range(n):
        body = {"dataset_id": dataset_id, "target": "target", "parameters": {"n_rules": 5, "epochs": epochs}}
        r = c.post("/v1/jobs", json=body)
        r.raise_for_status()
        ids.append(r.json()["id"])
    return ids


def wait_jobs(c: httpx.Client, ids: list[str], timeout: float) -> dict[str, str]:
    """Poll until every job is final or `timeout` passes; each job's last state."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        for j in ids:
            try:
                r = c.get(f"/v1/jobs/{j}")
                if r.status_code == 200:
                    states[j] = r.json()["state"]
            except httpx.HTTPError:
                pass
        if len(states) == len(ids) and all(s in ("succeeded", "failed", "cancelled") for s in states.values()):
            break
        time.sleep(0.3)
    return states


def prepare_model(cluster: Cluster, epochs: int) -> tuple[str, str]:
    """Upload heart.csv, train a model and point its `production` alias at it; (dataset id, predict ref)."""
    with cluster.client() as c, open(HEART, "rb") as fh:
        r = c.post("/v1/datasets", files={"file": ("heart.csv", fh, "text/csv")})
        r.raise_for_status()
        ds = r.json()["id"]
        (job,) = submit_jobs(c, ds, 1, epochs)
        states = wait_jobs(c, [job], 180)
        if states.get(job) != "succeeded":
            raise RuntimeError(f"training the served model: {states}\n{cluster.logs()}")
        r = c.put("/v1/registered-models/heart/aliases/production", json={"version": 1})
        r.raise_for_status()
    return ds, "heart@production"
