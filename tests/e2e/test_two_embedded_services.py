"""Two `neurules-admin serve` on one data directory: the second refuses to start, and the first keeps serving
and training its running job (the second used to requeue that job as an orphan of a previous embedded worker
and train it a second time beside the first; see `worker.database_lock`)."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ADMIN, Proc, admin, clean_env, free_port, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CSV = "a,b,target\n" + "".join(f"{i % 17},{(i * 7) % 13},{int(i % 17 > 8)}\n" for i in range(120))


def held_by(db: Path, job_id: str) -> tuple[str, str | None, int]:
    """The job's state, worker and attempts as the database has them."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        state, worker, attempts = c.execute(
            "SELECT state, worker, attempts FROM jobs WHERE id = ?", (job_id,)
        ).fetchone()
    return state, worker, attempts


def exit_status(second: Proc, before: tuple[str, str | None, int], db: Path, job_id: str) -> int | None:
    """The second service's exit status; None when it is still running after 30 s or took the first one's job."""
    deadline = time.monotonic() + 30
    while second.p.poll() is None and time.monotonic() < deadline and held_by(db, job_id) == before:
        time.sleep(0.1)
    return second.p.poll()


def probe_while_starting(lock: Path, url: str, proc: Proc) -> int:
    """Once the lock file names a holder, try to take the lock (and give it back at once) until the server is
    ready: how many tries got it."""
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip()):
        assert proc.p.poll() is None and time.monotonic() < deadline, proc.tail()
        time.sleep(0.01)
    got = 0
    while True:
        fd = os.open(lock, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            got += 1  # closing the descriptor below gives it back
        except BlockingIOError:
            pass
        finally:
            os.close(fd)
        try:
            if httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200:
                return got
        except httpx.HTTPError:
            pass
        assert proc.p.poll() is None and time.monotonic() < deadline, proc.tail()
        time.sleep(0.02)


def test_a_second_service_on_the_same_data_refuses_to_start(tmp_path: Path) -> None:
    env = clean_env()  # `make run`: no environment, ./var of the working directory
    admin(["create-tenant", "t"], env, tmp_path)
    key = admin(["create-key", "t"], env, tmp_path)
    url = f"http://127.0.0.1:{free_port()}"
    first = Proc([*ADMIN, "serve", "--port", url.rsplit(":", 1)[1]], env, tmp_path, tmp_path / "first.log")
    try:
        wait_ready(url, first)
        with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=10) as c:
            ds = c.post("/v1/datasets", files={"file": ("d.csv", CSV.encode(), "text/csv")}).json()["id"]
            job = c.post(
                "/v1/jobs", json={"dataset_id": ds, "target": "target", "parameters": {"n_rules": 3, "epochs": 5000}}
            ).json()["id"]
            deadline = time.monotonic() + 60
            while (got := c.get(f"/v1/jobs/{job}").json())["state"] != "running":
                assert got["state"] == "queued" and time.monotonic() < deadline, (got, first.tail())
                time.sleep(0.1)
            db = tmp_path / "var" / "neurules.sqlite3"
            before = held_by(db, job)

            second = Proc([*ADMIN, "serve", "--port", str(free_port())], env, tmp_path, tmp_path / "second.log")
            try:
                code = exit_status(second, before, db, job)
            finally:
                second.stop()
            said = second.tail()
            lock = os.path.realpath(db) + ".lock"
            assert code is not None and code != 0, said
            assert lock in said and f"held by pid {first.p.pid}" in said, said
            assert "Traceback" not in said, said

            assert c.get("/readyz").status_code == 200  # the first one serves on ...
            got = c.get(f"/v1/jobs/{job}").json()
            assert got["state"] == "running" and got["attempts"] == 1 and got["error"] is None, got
            assert held_by(db, job) == before == ("running", before[1], 1)  # ... its job still its own
            assert before[1] is not None and f"/{first.p.pid}/" in before[1]
            c.post(f"/v1/jobs/{job}/cancel")  # stop training before the server stops
    finally:
        first.stop()
    assert "reaped stale job" not in first.tail(100_000)


def test_with_two_server_processes_the_one_running_the_embedded_worker_holds_the_lock(tmp_path: Path) -> None:
    """`serve --workers 2`: process 0 runs the embedded worker and holds the lock with the supervisor, which
    handed it over as the process started (a killed supervisor leaves it running, and its jobs must stay its own);
    a second `serve` names that process. From the moment the supervisor takes the lock it is never free: it was
    released for process 0 to take again, and a second service starting meanwhile took it and the first stopped."""
    env = clean_env()
    port = free_port()
    lock = Path(os.path.realpath(tmp_path / "var" / "neurules.sqlite3") + ".lock")
    first = Proc([*ADMIN, "serve", "--port", str(port), "--workers", "2"], env, tmp_path, tmp_path / "first.log")
    try:
        free_moments = probe_while_starting(lock, f"http://127.0.0.1:{port}", first)
        assert free_moments == 0, first.tail()
        holder = int(lock.read_text())
        assert holder != first.p.pid
        assert int(Path(f"/proc/{holder}/stat").read_text().rsplit(")", 1)[1].split()[1]) == first.p.pid  # its child
        second = subprocess.run(
            [*ADMIN, "serve", "--port", str(free_port()), "--workers", "2"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode != 0 and f"{lock} is held by pid {holder}" in second.stderr, second.stderr
        assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
    finally:
        first.stop()


def test_uvicorn_with_several_processes_runs_one_embedded_worker(tmp_path: Path) -> None:
    """`uvicorn worker.service:app --workers 2` in embedded mode: one process takes the lock and runs the embedded
    worker, its sibling serves the API only (it used to run a second worker; then, with the lock, it refused to
    start and uvicorn stopped both, exit status 0)."""
    env = clean_env()
    admin(["migrate"], env, tmp_path)  # uvicorn alone does not migrate
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", "worker.service:app", "--port", str(port), "--workers", "2"]
    server = Proc(cmd, env, tmp_path, tmp_path / "uvicorn.log")
    try:
        wait_ready(f"http://127.0.0.1:{port}", server)
        time.sleep(1.0)  # both processes up (readiness answers from whichever accepted)
        assert server.p.poll() is None, server.tail()
        said = server.tail()
        assert said.count("serves the API only") == 1 and "Traceback" not in said, said
        for _ in range(10):
            assert httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
    finally:
        server.stop()


def test_a_clean_stop_during_training_gives_the_attempt_back(tmp_path: Path) -> None:
    """An operator probe: two SIGTERMs during one long training failed the job ("worker lost ... resubmit"): the
    job stayed `running` at each stop and the next start's sweep requeued it counting the attempt."""
    env = clean_env()
    admin(["create-tenant", "t"], env, tmp_path)
    key = admin(["create-key", "t"], env, tmp_path)
    db = tmp_path / "var" / "neurules.sqlite3"
    port = str(free_port())
    url = f"http://127.0.0.1:{port}"
    job = ""
    for stop in range(2):
        proc = Proc([*ADMIN, "serve", "--port", port], env, tmp_path, tmp_path / f"serve{stop}.log")
        try:
            wait_ready(url, proc)
            with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=10) as c:
                if not job:
                    ds = c.post("/v1/datasets", files={"file": ("d.csv", CSV.encode(), "text/csv")}).json()["id"]
                    body = {"dataset_id": ds, "target": "target", "parameters": {"n_rules": 3, "epochs": 5000}}
                    job = c.post("/v1/jobs", json=body).json()["id"]
                deadline = time.monotonic() + 90  # queued again: the start's resend finds its message gone
                while held_by(db, job)[0] != "running":
                    assert time.monotonic() < deadline, (held_by(db, job), proc.tail())
                    time.sleep(0.1)
        finally:
            proc.stop()
        assert held_by(db, job) == ("queued", None, 0), (stop, held_by(db, job), proc.tail())
