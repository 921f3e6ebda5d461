"""Cancel racing a worker: the cancel never overwrites a state the worker wrote meanwhile."""

from __future__ import annotations

import itertools

import pytest
from sqlalchemy import update

from app.services import jobs as jobsvc
from app.services.errors import Conflict
from app.tables import Job
from tests.app.test_jobs_api import dataset


def _job(api) -> str:
    ds = dataset(api)
    r = api.client.post("/v1/jobs", json={"dataset_id": ds, "target": "target"}, headers=api.h())
    assert r.status_code == 202, r.text
    return r.json()["id"]  # type: ignore[no-any-return]


def _set(api, job_id: str, **values) -> None:
    with api.app.state.service.db.session() as s:
        s.execute(update(Job).where(Job.id == job_id).values(**values))


def test_cancel_of_a_job_claimed_meanwhile_asks_it_to_stop(api) -> None:
    job_id = _job(api)
    db = api.app.state.service.db
    with db.sessionmaker() as s:
        job = s.get(Job, job_id)
        assert job.state == "queued"
        with db.session() as w:  # a worker claims it after the API read the row
            assert jobsvc.claim(w, job_id, "w1")
        jobsvc.request_cancel(s, job)
        s.commit()
        assert job.state == "running" and job.cancel_requested
    with db.sessionmaker() as s:
        row = s.get(Job, job_id)
        assert row.state == "running" and row.cancel_requested and row.worker == "w1" and row.finished_at is None


def test_cancel_of_a_job_finished_meanwhile_is_a_conflict(api) -> None:
    job_id = _job(api)
    db = api.app.state.service.db
    with db.session() as w:
        assert jobsvc.claim(w, job_id, "w1")
    with db.sessionmaker() as s:
        job = s.get(Job, job_id)
        assert job.state == "running"
        with db.session() as w:
            assert jobsvc.finish(w, job_id, "w1", "succeeded")
        with pytest.raises(Conflict):
            jobsvc.request_cancel(s, job)
        s.rollback()
    with db.sessionmaker() as s:
        row = s.get(Job, job_id)
        assert row.state == "succeeded" and not row.cancel_requested


def test_cancel_api_states(api) -> None:
    job_id = _job(api)
    r = api.client.post(f"/v1/jobs/{job_id}/cancel", headers=api.h())
    assert r.status_code == 202 and r.json()["state"] == "cancelled"
    r = api.client.post(f"/v1/jobs/{job_id}/cancel", headers=api.h())
    assert r.status_code == 409 and r.json()["error"]["code"] == "job_finished"
    assert api.client.post(f"/v1/jobs/{job_id}/cancel", headers=api.h(api.key_b)).status_code == 404


def test_alias_created_concurrently_is_moved_not_a_500(api, doc) -> None:
    from app.services import registry
    from app.tables import ModelAlias, ModelVersion

    v1 = api.import_model(doc)["id"]
    v2 = api.import_model(doc)["id"]
    db = api.app.state.service.db
    with db.session() as s:
        registry.set_alias(s, registry.get_model(s, api.tenant_a, "risk"), "prod", s.get(ModelVersion, v1))
    with db.session() as s:  # this request read "no such alias" before the other one committed it
        rm, mv = registry.get_model(s, api.tenant_a, "risk"), s.get(ModelVersion, v2)
        real_get = s.get
        s.get = lambda cls, key, **kw: None if cls is ModelAlias else real_get(cls, key, **kw)  # type: ignore[method-assign]
        registry.set_alias(s, rm, "prod", mv)
    r = api.client.get("/v1/registered-models/risk", headers=api.h())
    assert r.json()["aliases"] == {"prod": v2}


def test_a_job_on_a_dataset_deleted_meanwhile_is_a_404_not_a_500(api, monkeypatch) -> None:
    """The dataset is deleted between the request's lookup and its insert: 404, nothing queued (was 500)."""
    from sqlalchemy import delete

    from app.services import datasets
    from app.tables import Dataset

    ds = dataset(api)
    db, real_get = api.app.state.service.db, datasets.get_dataset

    def deleted_meanwhile(session, tenant_id, dataset_id, **kw):
        row = real_get(session, tenant_id, dataset_id, **kw)
        with db.session() as other:  # another request deletes it now
            other.execute(delete(Dataset).where(Dataset.id == dataset_id))
        return row

    monkeypatch.setattr("app.services.job_submission.datasets.get_dataset", deleted_meanwhile)
    r = api.client.post("/v1/jobs", json={"dataset_id": ds, "target": "target"}, headers=api.h())
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", r.text
    assert ds in r.json()["error"]["message"]
    assert api.count("jobs") == 0 and api.queue.sent == []


@pytest.mark.integration
def test_a_dataset_delete_waits_for_a_job_being_submitted_on_it(pg_database, tmp_path) -> None:
    """A job inserted (not yet committed) while the dataset is deleted: the delete answers 409 once the job
    commits, instead of deleting the dataset under the new job (which then failed on the worker)."""
    import threading

    from sqlalchemy import create_engine, text

    from tests.conftest import make_api

    gen = make_api(tmp_path, "postgresql", pg_database)
    api = next(gen)
    try:
        ds = dataset(api)
        submit = create_engine(pg_database)  # a job request in another process, between insert and commit
        conn = submit.connect()
        tx = conn.begin()
        conn.execute(
            text(
                "INSERT INTO jobs (id, tenant_id, dataset_id, dataset_sha256, target, model_name, parameters, state, "
                "cancel_requested, epoch, n_epochs, attempts, created_at) VALUES ('job_race', :t, :d, '', 'target', "
                "'m', '{}', 'queued', false, 0, 0, 0, now())"
            ),
            {"t": api.tenant_a, "d": ds},
        )
        answer: list[int] = []
        deleting = threading.Thread(
            target=lambda: answer.append(api.client.delete(f"/v1/datasets/{ds}", headers=api.h()).status_code)
        )
        deleting.start()
        deleting.join(1.0)
        tx.commit()
        conn.close()
        deleting.join(10)
        submit.dispose()
        assert answer == [409]
        with api.app.state.service.db.engine.connect() as c:
            kept = c.execute(text("SELECT dataset_id FROM jobs WHERE id = 'job_race'")).scalar_one()
        assert kept == ds
    finally:
        gen.close()


def test_on_sqlite_a_dataset_delete_waits_for_a_job_being_submitted_on_it(sqlite_api) -> None:
    """The same race on SQLite, which ignores the row lock: the delete counted no active job, waited for the
    write lock, then deleted the dataset under the job just committed (answered 202, failed on the worker)."""
    import sqlite3
    import threading

    from sqlalchemy import text

    ds = dataset(sqlite_api)
    engine = sqlite_api.app.state.service.db.engine
    other = sqlite3.connect(engine.url.database, isolation_level=None, timeout=10)  # another process's request
    other.execute("BEGIN IMMEDIATE")
    other.execute(
        "INSERT INTO jobs (id, tenant_id, dataset_id, dataset_sha256, target, model_name, parameters, state, "
        "cancel_requested, epoch, n_epochs, attempts, created_at) VALUES ('job_race', ?, ?, '', 'target', "
        "'m', '{}', 'queued', 0, 0, 0, 0, '2026-01-01 00:00:00')",
        (sqlite_api.tenant_a, ds),
    )
    answer: list[int] = []
    deleting = threading.Thread(
        target=lambda: answer.append(sqlite_api.client.delete(f"/v1/datasets/{ds}", headers=sqlite_api.h()).status_code)
    )
    deleting.start()
    deleting.join(1.0)
    other.execute("COMMIT")
    other.close()
    deleting.join(10)
    assert answer == [409]
    with engine.connect() as c:
        assert c.execute(text("SELECT dataset_id FROM jobs WHERE id = 'job_race'")).scalar_one() == ds


def _concurrently(calls, n_threads: int = 8) -> list:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(n_threads) as pool:
        return list(pool.map(lambda call: call(), calls))


def test_concurrent_alias_moves_and_deletes_are_never_a_500_and_events_chain(api, doc) -> None:
    """On SQLite (no FOR UPDATE) a move read the alias, a delete removed it, the move's UPDATE matched nothing:
    a 500; moves read the same `from_version`, so the events did not chain. Each change now sees the last."""
    for _ in range(3):
        api.import_model(doc)
    path = "/v1/registered-models/risk/aliases/stage"
    calls = [
        (lambda v=1 + i % 3: api.client.put(path, json={"version": v}, headers=api.h()))
        if i % 2 == 0
        else (lambda: api.client.delete(path, headers=api.h()))
        for i in range(60)
    ]
    statuses = sorted({r.status_code for r in _concurrently(calls)})
    assert set(statuses) <= {200, 204, 404}, statuses
    r = api.client.get("/v1/registered-models/risk/events", params={"limit": 200}, headers=api.h())
    events = [e for e in reversed(r.json()["items"]) if e["alias"] == "stage"]  # oldest first
    for prev, e in itertools.pairwise(events):
        assert e["from_version"] == prev["to_version"], (prev, e)  # to_version None after a delete
    last = api.client.get("/v1/registered-models/risk", headers=api.h()).json()["aliases"].get("stage")
    assert (last is None) == (events[-1]["action"] == "alias_deleted")


def test_concurrent_imports_of_one_model_all_get_a_version(api, doc) -> None:
    """On SQLite concurrent imports took the same version number until one gave up with a 409."""
    calls = [lambda: api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h())] * 24
    answers = _concurrently(calls)
    assert [r.status_code for r in answers] == [201] * 24, [r.text for r in answers if r.status_code != 201]
    assert sorted(r.json()["version"] for r in answers) == list(range(1, 25))


def test_concurrent_versions_and_moves_of_two_aliases_keep_one_event_chain(api, doc) -> None:
    """Every change of a model is one link of its registry event chain: new versions (which lock the model first)
    and moves of two aliases (which now lock the model before the alias, in the same order) run concurrently, none
    is refused or a 500, and the chain verifies with one event per change."""
    api.import_model(doc)
    base = "/v1/registered-models/risk/aliases"
    calls = []
    new_version = {"name": "risk", "rule_list": doc}
    for i in range(36):
        if i % 3 == 0:
            calls.append(lambda: api.client.post("/v1/models", json=new_version, headers=api.h()))
        else:
            alias = "prod" if i % 3 == 1 else "stage"
            calls.append(lambda a=alias: api.client.put(f"{base}/{a}", json={"version": 1}, headers=api.h()))
    answers = _concurrently(calls)
    assert sorted({r.status_code for r in answers}) == [200, 201], [r.text for r in answers if r.status_code >= 300]
    check = api.client.get("/v1/audit/verify", headers=api.h()).json()
    assert check["intact"], check
    created = 1 + sum(r.status_code == 201 for r in answers)
    moves = sum(r.status_code == 200 for r in answers)
    assert check["registry_events"]["events_checked"] == created + moves
