"""Cancel racing a worker: the cancel never overwrites a state the worker wrote meanwhile."""

from __future__ import annotations

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
