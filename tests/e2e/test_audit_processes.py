"""The audit chain with several processes writing at once, on PostgreSQL under the app role.

1. Three processes, each with its own group-commit `AuditWriter` and 24 concurrent writers, append
   to the same two tenants' chains: every write commits and both chains verify intact.
2. `neurules-admin serve --workers 2` (two uvicorn processes on one SO_REUSEPORT port) under the
   app role: concurrent predictions on fresh connections (the kernel spreads them over both
   processes), then one chain, intact, with exactly one row per decision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.conftest import ROOT, Roles, redis_available, rule_list_doc, skip_unless_ci
from tests.e2e.conftest import ADMIN, Proc, clean_env, free_port

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

WRITER = """
import asyncio, random, sys
from datetime import UTC, datetime
from app.db import Database
from app.services.audit import AuditWriter

url, tenants, n, proc = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3]), sys.argv[4]

def rows(i):
    rnd = random.Random(f"{proc}-{i}")
    return [{"created_at": datetime.now(UTC), "tenant_id": rnd.choice(tenants), "api_key_id": "key_" + proc,
             "model_version_id": "mv_1", "input_digest": f"{i:064x}", "rule_id": j, "missing_filled": False,
             "output": {"prediction": 1, "probabilities": {"0": 0.5, "1": 0.5}}} for j in range(rnd.randint(1, 3))]

async def main():
    writer = AuditWriter(Database(url).engine)
    sem = asyncio.Semaphore(24)
    async def one(i):
        async with sem:
            batch = rows(i)
            await writer.write(batch)
            return len(batch)
    print(sum(await asyncio.gather(*(one(i) for i in range(n)))))
    writer.close()

asyncio.run(main())
"""


def test_writer_processes_share_the_chains(roles: Roles) -> None:
    from app.admin import verify_audit

    tenants = [f"tn_proc_{uuid.uuid4().hex[:8]}" for _ in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, roles.app_url, ",".join(tenants), "150", str(p)],
            cwd=ROOT,
            env=clean_env(PYTHONPATH=str(ROOT)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in range(3)
    ]
    written = 0
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        written += int(out.strip())
    reports = [r for t in tenants for r in verify_audit(roles.app_url, t)]
    assert all(r.intact for r in reports), [r.first_break for r in reports]
    assert sum(r.rows_checked for r in reports) == written and all(r.rows_checked > 0 for r in reports)


def _wait_healthy(url: str, proc: Proc, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            pytest.fail(f"server exited early:\n{proc.tail()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"server not up after {timeout}s:\n{proc.tail()}")


def test_two_server_processes_under_the_app_role(roles: Roles, tmp_path) -> None:
    if not redis_available():
        skip_unless_ci("Redis not reachable on 127.0.0.1:6379")
    env = clean_env(
        NEURULES_MODE="distributed",
        NEURULES_DATABASE_URL=roles.app_url,
        NEURULES_BROKER_URL="redis://127.0.0.1:6379/0",
        NEURULES_QUEUE=f"nr-audit-{uuid.uuid4().hex[:8]}",
        NEURULES_DATA_DIR=str(tmp_path / "var"),
        NEURULES_ACCESS_LOG="false",
    )
    name = f"procs-{uuid.uuid4().hex[:6]}"
    subprocess.run([*ADMIN, "create-tenant", name], env=env, cwd=tmp_path, check=True, capture_output=True)
    key = subprocess.run(
        [*ADMIN, "create-key", name], env=env, cwd=tmp_path, check=True, capture_output=True, text=True
    ).stdout.strip()
    port = free_port()
    server = Proc([*ADMIN, "serve", "--port", str(port), "--workers", "2"], env, tmp_path, tmp_path / "serve.log")
    url, h = f"http://127.0.0.1:{port}", {"X-API-Key": key}
    try:
        _wait_healthy(url, server)
        v = httpx.post(f"{url}/v1/models", json={"name": "risk", "rule_list": rule_list_doc()}, headers=h).json()
        rec = {"age": 67, "income": None, "smoker": "yes"}

        def burst(i: int) -> int:
            n = 1 + i % 3
            with httpx.Client(base_url=url, headers=h, timeout=30) as c:  # a new connection each time
                r = c.post(f"/v1/models/{v['id']}/predict", json={"records": [rec] * n}, params={"explain": False})
                assert r.status_code == 200, r.text
            return n

        with ThreadPoolExecutor(8) as pool:
            decisions = sum(pool.map(burst, range(96)))
        report = httpx.get(f"{url}/v1/audit/verify", headers=h).json()
        assert report["intact"] and report["rows_checked"] == decisions, report
        out = subprocess.run(
            [*ADMIN, "verify-audit", "--tenant", name], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        assert out.returncode == 0 and json.loads(out.stdout)["head"]["seq"] == decisions, out.stderr
    finally:
        server.stop()
