"""Registry events (written with each alias change and version), training history (a point per progress
write) and dataset previews through the API, with tenant isolation."""

from __future__ import annotations

from sqlalchemy import select

from app.services import jobs as jobsvc
from app.tables import ApiKey, Job
from tests.app.governance_helpers import upload


def _key_id(api, tenant_id: str) -> str:
    with api.app.state.service.db.sessionmaker() as s:
        return s.scalar(select(ApiKey.id).where(ApiKey.tenant_id == tenant_id))  # type: ignore[return-value]


def test_alias_moves_and_versions_are_events(api, doc) -> None:
    api.import_model(doc)
    v2 = api.import_model(doc)
    path = "/v1/registered-models/risk/aliases/production"
    assert api.client.put(path, json={"version": 1}, headers=api.h()).status_code == 200
    assert api.client.put(path, json={"version_id": v2["id"]}, headers=api.h()).status_code == 200
    assert api.client.put(path, json={"version": 7}, headers=api.h()).status_code == 404  # no event
    assert api.client.delete(path, headers=api.h()).status_code == 204
    assert api.client.delete(path, headers=api.h()).status_code == 404  # no event
    r = api.client.get("/v1/registered-models/risk/events", headers=api.h())
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    got = [(e["action"], e["alias"], e["from_version"], e["to_version"]) for e in items]
    assert got == [
        ("alias_deleted", "production", 2, None),
        ("alias_set", "production", 1, 2),
        ("alias_set", "production", None, 1),
        ("version_created", None, None, 2),
        ("version_created", None, None, 1),
    ]
    key_id = _key_id(api, api.tenant_a)
    assert {e["api_key_id"] for e in items} == {key_id} and all(e["at"] for e in items)
    assert api.count("registry_events") == 5
    assert api.client.get("/v1/registered-models/risk/events", headers=api.h(api.key_b)).status_code == 404
    page = api.client.get("/v1/registered-models/risk/events", params={"limit": 2, "offset": 1}, headers=api.h())
    assert [e["action"] for e in page.json()["items"]] == ["alias_set", "alias_set"]


def test_history_points_grow_with_progress_writes(api) -> None:
    data = b"x,target\n" + b"".join(f"{i},{i % 2}\n".encode() for i in range(40))
    ds = upload(api, data)
    r = api.client.post("/v1/jobs", json={"dataset_id": ds["id"], "target": "target"}, headers=api.h())
    job_id = r.json()["id"]
    db = api.app.state.service.db

    def history() -> dict:
        r = api.client.get(f"/v1/jobs/{job_id}/history", headers=api.h())
        assert r.status_code == 200, r.text
        return r.json()  # type: ignore[no-any-return]

    assert history()["points"] == [] and history()["val_score_name"] == "weighted F1 on the held-out split"
    with db.session() as s:
        assert jobsvc.claim(s, job_id, "w1")
    for epoch in (1, 5, 10):
        with db.session() as s:
            jobsvc.write_progress(
                s, job_id, "w1", {"epoch": epoch, "n_epochs": 10, "loss": 1 / epoch, "val_score": 0.5}
            )
        assert [p["epoch"] for p in history()["points"]][-1] == epoch
    with db.session() as s:  # a worker that does not hold the job writes nothing
        jobsvc.write_progress(s, job_id, "w2", {"epoch": 11, "n_epochs": 10, "loss": 0.0})
    points = history()["points"]
    assert [(p["epoch"], p["loss"], p["val_score"], p["attempt"]) for p in points] == [
        (1, 1.0, 0.5, 1),
        (5, 0.2, 0.5, 1),
        (10, 0.1, 0.5, 1),
    ]
    with db.sessionmaker() as s:
        job = s.get(Job, job_id)
        assert job is not None and job.epoch == 10  # the job row keeps the latest point
    assert api.client.get(f"/v1/jobs/{job_id}/history", headers=api.h(api.key_b)).status_code == 404
    assert api.client.get("/v1/jobs/job_nope/history", headers=api.h()).status_code == 404


def test_preview_shows_the_first_rows_as_the_file_has_them(api) -> None:
    data = b"age,smoker,note\n63,yes,a b\n41,NA,\n\n50,no, x \n70,?,y\n"
    ds = upload(api, data)
    r = api.client.get(f"/v1/datasets/{ds['id']}/preview", params={"limit": 3}, headers=api.h())
    assert r.status_code == 200, r.text
    assert r.json() == {
        "columns": ["age", "smoker", "note"],
        "rows": [["63", "yes", "a b"], ["41", None, None], ["50", "no", "x"]],
    }
    assert len(api.client.get(f"/v1/datasets/{ds['id']}/preview", headers=api.h()).json()["rows"]) == 4
    semi = upload(api, "a;b\n1,5;é\n".encode())
    assert api.client.get(f"/v1/datasets/{semi['id']}/preview", headers=api.h()).json()["rows"] == [["1,5", "é"]]
    for limit in (0, 101):
        r = api.client.get(f"/v1/datasets/{ds['id']}/preview", params={"limit": limit}, headers=api.h())
        assert r.status_code == 422 and r.json()["error"]["details"][0]["field"].endswith("limit")
    assert api.client.get(f"/v1/datasets/{ds['id']}/preview", headers=api.h(api.key_b)).status_code == 404
