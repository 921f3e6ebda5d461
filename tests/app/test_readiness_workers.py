"""/readyz reports the database, the broker and the live training workers separately, with the documented rule."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from app.services import workers
from app.tables import utcnow
from tests.conftest import Api, make_api
from worker.liveness import WorkerBeat


@pytest.fixture
def needs_one(tmp_path: Path) -> Iterator[Api]:
    """The API where readiness needs one live training worker."""
    yield from make_api(tmp_path, "sqlite", ready_min_workers=1)


def beat(api: Api, name: str, age_s: float = 0.0) -> None:
    """Write a worker heartbeat row as a worker `age_s` seconds ago would have."""
    with api.app.state.service.db.session() as s:
        workers.beat(
            s, name=name, queue=api.settings.queue, hostname="h", pid=1, now=utcnow() - timedelta(seconds=age_s)
        )


def test_no_worker_is_reported_and_not_required_by_default(sqlite_api: Api) -> None:
    r = sqlite_api.client.get("/readyz")
    body = r.json()
    assert r.status_code == 200, body
    assert body["workers"] == {"live": 0, "required": 0}
    assert body["checks"]["workers"].startswith("warning: no live training worker")
    assert body["checks"]["database"] == "ok"


def test_no_worker_is_not_ready_where_training_is_required(needs_one: Api) -> None:
    r = needs_one.client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "unavailable"
    assert r.json()["checks"]["workers"] == "error: 0 live training worker(s), at least 1 required"
    beat(needs_one, "w1@h/1")
    r = needs_one.client.get("/readyz")
    assert r.status_code == 200 and r.json()["workers"] == {"live": 1, "required": 1}, r.json()
    assert r.json()["checks"]["workers"] == "ok"


def test_a_worker_that_stopped_beating_no_longer_counts(needs_one: Api) -> None:
    window = needs_one.settings.worker_alive_s
    beat(needs_one, "dead@h/1", age_s=window + 1)
    beat(needs_one, "alive@h/2", age_s=window - 1)
    assert needs_one.client.get("/readyz").json()["workers"]["live"] == 1
    with needs_one.app.state.service.db.sessionmaker() as s:
        assert workers.live_workers(s, needs_one.settings.queue, within_s=window) == ["alive@h/2"]
        assert workers.live_workers(s, "another-queue", within_s=window) == []


def test_embedded_mode_needs_its_worker_by_default(tmp_path: Path) -> None:
    from app.settings import Settings

    assert Settings(data_dir=tmp_path).required_workers == 1
    assert Settings(data_dir=tmp_path, embedded_worker=False).required_workers == 0
    assert Settings(data_dir=tmp_path, ready_min_workers=3).required_workers == 3


def test_the_worker_heartbeat_thread_writes_and_removes_its_row(sqlite_api: Api) -> None:
    state = sqlite_api.app.state.service
    settings = sqlite_api.settings.model_copy(update={"heartbeat_interval_s": 0.05})
    hb = WorkerBeat(lambda: state.db, settings, "t@h/7")
    hb.start()
    try:
        deadline = time.monotonic() + 5
        while sqlite_api.client.get("/readyz").json()["workers"]["live"] != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sqlite_api.client.get("/readyz").json()["workers"]["live"] == 1
    finally:
        hb.stop()
    assert sqlite_api.client.get("/readyz").json()["workers"]["live"] == 0
    assert sqlite_api.count("worker_heartbeats") == 0


def test_readyz_description_states_the_rule(sqlite_api: Api) -> None:
    op = sqlite_api.client.get("/openapi.json").json()["paths"]["/readyz"]["get"]
    assert "NEURULES_READY_MIN_WORKERS" in op["description"] and "workers.live: 0" in op["description"]


def test_readyz_says_when_the_schema_is_not_migrated(tmp_path: Path) -> None:
    """The service as `uvicorn worker.service:app` runs it, on a database nobody migrated: not ready, and
    the database check says what to do (it said ok while every request failed on a missing table)."""
    from fastapi.testclient import TestClient

    from app.admin import migrate
    from app.settings import Settings
    from worker.service import build_service

    settings = Settings(data_dir=tmp_path, embedded_worker=False, access_log=False)
    with TestClient(build_service(settings, configure_logs=False)) as client:
        r = client.get("/readyz")
        assert r.status_code == 503, r.text
        database = r.json()["checks"]["database"]
        assert "not migrated" in database and "neurules-admin migrate" in database
        migrate(settings.resolved_database_url)
        r = client.get("/readyz")
        assert r.status_code == 200 and r.json()["checks"]["database"] == "ok", r.text


def test_a_schema_behind_the_code_is_not_ready_one_ahead_is() -> None:
    """Behind: requests would fail on missing columns. Ahead: a rolling upgrade migrated first, and old
    processes must stay in their load balancer (migrations only add)."""
    from app.admin import expected_schema
    from app.services.readiness import ExpectedSchema

    schema = expected_schema()  # from the files under migrations/
    assert schema is not None and "0001" in schema.older and schema.head not in schema.older
    assert schema.problem(schema.head) is None
    assert f"older than the {schema.head}" in (schema.problem("0001") or "")
    assert schema.problem(None) == "the schema is not migrated"
    assert ExpectedSchema("0004", frozenset({"0003"})).problem("0005") is None


def test_without_the_migrations_beside_the_code_the_schema_is_not_checked(tmp_path: Path, monkeypatch) -> None:
    """A wheel install ships no migrations/: the service still starts (the schema check is left out)."""
    from app import admin

    monkeypatch.setattr(admin, "MIGRATIONS", tmp_path / "nowhere")
    admin.expected_schema.cache_clear()
    try:
        assert admin.expected_schema() is None
    finally:
        admin.expected_schema.cache_clear()


def test_every_server_process_needs_the_same_live_workers(tmp_path: Path) -> None:
    """An operator probe's /readyz under `serve --workers 2` answered `required: 1` from process 0 and `required: 0`
    from process 1: with the embedded worker dead, readiness flapped by the process that answered."""
    from app.settings import Settings
    from worker.serve import process_settings

    embedded = Settings(data_dir=tmp_path)
    first, second = process_settings(0, embedded), process_settings(1, embedded)
    assert first.run_embedded_worker and not second.run_embedded_worker  # one embedded worker per service
    assert first.required_workers == second.required_workers == 1
    api_only = Settings(data_dir=tmp_path, embedded_worker=False)
    assert process_settings(1, api_only).required_workers == 0
