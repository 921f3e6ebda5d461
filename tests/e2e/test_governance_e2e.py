"""Background evaluations through the real processes: uvicorn queues them on Redis, a separate `celery
worker` scores them on PostgreSQL (the sync threshold is 0, so every evaluation goes the long way)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.app.governance_helpers import csv_bytes, labelled_rows
from tests.conftest import rule_list_doc
from tests.e2e.conftest import Service, distributed_service

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def background(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The distributed service with every evaluation sent to the workers."""
    yield from distributed_service(tmp_path_factory, evaluation_sync_max_rows="0")


def _finished(client: httpx.Client, ev_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    seen = []
    while time.monotonic() < deadline:
        ev = client.get(f"/v1/evaluations/{ev_id}").json()
        seen.append((ev["state"], ev["progress"]))
        if ev["state"] in ("succeeded", "failed"):
            return ev  # type: ignore[no-any-return]
        time.sleep(0.2)
    pytest.fail(f"evaluation {ev_id} did not finish: {seen[-5:]}")


def _upload(client: httpx.Client, data: bytes) -> str:
    r = client.post("/v1/datasets", files={"file": ("d.csv", data, "text/csv")})
    assert r.status_code == 201, r.text
    return r.json()["id"]  # type: ignore[no-any-return]


def test_evaluations_run_on_a_celery_worker(background: Service) -> None:
    try:
        with httpx.Client(base_url=background.url, headers={"X-API-Key": background.key}, timeout=30) as client:
            v = client.post("/v1/models", json={"name": "risk", "rule_list": rule_list_doc()}).json()
            rows = labelled_rows(400, seed=9)
            r = client.post(f"/v1/models/{v['id']}/evaluations", json={"dataset_id": _upload(client, csv_bytes(rows))})
            assert r.status_code == 202, r.text
            assert r.json()["state"] == "queued" and r.json()["progress"] == 0.0
            ev = _finished(client, r.json()["id"])
            assert ev["state"] == "succeeded" and ev["progress"] == 1.0, ev
            assert ev["n_rows"] == 400 and sum(rule["n"] for rule in ev["rules"]) == 400
            assert sum(map(sum, ev["confusion_matrix"]["matrix"])) == 400
            listed = client.get("/v1/models/risk@latest/evaluations").json()["items"]
            assert [e["id"] for e in listed] == [ev["id"]]

            rows[10][1] = "lots"  # only the scoring sees it: the worker fails the evaluation with the reason
            r = client.post(f"/v1/models/{v['id']}/evaluations", json={"dataset_id": _upload(client, csv_bytes(rows))})
            assert r.status_code == 202, r.text
            ev = _finished(client, r.json()["id"])
            assert ev["state"] == "failed" and ev["error_code"] == "invalid_values" and "line 12.income" in ev["error"]
    except AssertionError:
        print(background.logs())
        raise
