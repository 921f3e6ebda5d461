"""Backup while `neurules-admin serve` decides, restore after it stops, serve again: the restored database holds
every decision made before the backup, verifies intact, and the database it replaced is kept whole. An operator
probe: a `cp` of the file alone while serving held 0 of 270 audit rows (they were in the write-ahead log) and
verified as intact; a backup moved in place with `mv` had the old log replayed onto it at the next start (a corrupt
file, a chain read as truncated, or the restore silently undone)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import rule_list_doc
from tests.e2e.conftest import ADMIN, Proc, admin, clean_env, free_port, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

RECORD = {"age": 67, "income": 50, "smoker": "yes"}


def _audit_rows(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return int(c.execute("SELECT count(*) FROM audit_log").fetchone()[0])


def _serve(tmp: Path, env: dict[str, str], log: str) -> tuple[str, Proc]:
    port = free_port()
    proc = Proc([*ADMIN, "serve", "--port", str(port)], env, tmp, tmp / log)
    url = f"http://127.0.0.1:{port}"
    wait_ready(url, proc)
    return url, proc


def _decide(url: str, key: str, ref: str, n: int) -> None:
    r = httpx.post(f"{url}/v1/models/{ref}/predict", json={"records": [RECORD] * n}, headers={"X-API-Key": key})
    assert r.status_code == 200, r.text


def test_backup_while_serving_then_restore_after_stopping(tmp_path: Path) -> None:
    env = clean_env()
    db = tmp_path / "var" / "neurules.sqlite3"
    admin(["create-tenant", "ops"], env, tmp_path)
    key = admin(["create-key", "ops"], env, tmp_path)
    url, proc = _serve(tmp_path, env, "serve1.log")
    try:
        h = {"X-API-Key": key}
        r = httpx.post(f"{url}/v1/models", json={"name": "risk", "rule_list": rule_list_doc()}, headers=h)
        assert r.status_code == 201, r.text
        for _ in range(6):
            _decide(url, key, "risk@1", 50)  # 300 decisions, the newest in the write-ahead log
        made = json.loads(admin(["backup", str(tmp_path / "b.sqlite3")], env, tmp_path))
        assert [h["seq"] for h in made["audit_chain_heads"]] == [300] and made["integrity"] == "ok"
        assert _audit_rows(tmp_path / "b.sqlite3") == 300 and not (tmp_path / "b.sqlite3-wal").exists()
        _decide(url, key, "risk@1", 40)  # after the backup
        refused = subprocess.run(
            [*ADMIN, "restore", str(tmp_path / "b.sqlite3")],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert refused.returncode != 0 and "restore refused, nothing changed" in refused.stderr, refused.stderr
    finally:
        proc.stop()

    done = json.loads(admin(["restore", str(tmp_path / "b.sqlite3")], env, tmp_path))
    kept = Path(done["replaced_kept_as"])
    assert _audit_rows(db) == 300 and _audit_rows(kept) == 340
    assert not Path(f"{db}-wal").exists()
    verified = subprocess.run(
        [*ADMIN, "verify-audit"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr

    url, proc = _serve(tmp_path, env, "serve2.log")
    try:
        _decide(url, key, "risk@1", 1)  # the chain goes on from the backup's head
        r = httpx.get(f"{url}/v1/audit?limit=1", headers={"X-API-Key": key})
        assert r.json()["items"][0]["seq"] == 301, r.text
        assert httpx.get(f"{url}/v1/audit/verify", headers={"X-API-Key": key}).json()["intact"] is True
    finally:
        proc.stop()
