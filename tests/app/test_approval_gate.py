"""Reviews and the approval gate: a security probe imported a version and pointed `production` at it with one `full`
key in two calls, with no evaluation and no second person, and nothing could show a regulator that review happened
before go-live. A review is now a `version_reviewed` event in the model's hash-chained registry events; the key that
created a version may not review it, an approval needs a succeeded evaluation, and a tenant whose operator requires
approval moves an alias only to an approved version."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from app.services import registry_chain
from tests.app.governance_helpers import csv_bytes, evaluate, labelled_rows, upload
from tests.conftest import Api

ALIAS = "/v1/registered-models/risk/aliases"
NOTE = "read both rules; evaluated on the held-out 2026 file; compared with production"


def _reviewer(api: Api, label: str = "reviewer") -> tuple[str, str]:
    """A second full key of tenant a: (key id, key)."""
    from app.admin import create_key

    return create_key(api.url, "tenant-a", label)


def _review(api: Api, version: int, key: str, decision: str = "approve", note: str = NOTE, name: str = "risk") -> Any:
    return api.client.post(
        f"/v1/registered-models/{name}/versions/{version}/reviews",
        json={"decision": decision, "note": note},
        headers=api.h(key),
    )


def _evaluated(api: Api, version_id: str) -> str:
    """A succeeded evaluation of the version (by the creating key: anyone may score); its id."""
    ds = upload(api, csv_bytes(labelled_rows(60, seed=3)))
    r = evaluate(api, version_id, dataset_id=ds["id"])
    assert r.status_code == 201 and r.json()["state"] == "succeeded", r.text
    return str(r.json()["id"])


def _creator(api: Api) -> str:
    """The id of tenant a's first key (the one that imports in these tests)."""
    r = api.client.get("/v1/registered-models/risk/events", headers=api.h())
    (created,) = [e for e in r.json()["items"] if e["action"] == "version_created" and e["to_version"] == 1]
    return str(created["api_key_id"])


def _approval(api: Api, ref: str = "risk@1") -> dict[str, Any]:
    r = api.client.get(f"/v1/models/{ref}", headers=api.h())
    assert r.status_code == 200, r.text
    return r.json()["approval"]  # type: ignore[no-any-return]


def _policy(api: Api, on: bool) -> None:
    from app.admin import set_policy

    set_policy(api.url, "tenant-a", on)


def test_a_version_is_reviewed_by_another_key_after_an_evaluation(api: Api, doc) -> None:
    v = api.import_model(doc)
    creator = _creator(api)
    reviewer_id, reviewer = _reviewer(api)
    assert _approval(api) == {
        "state": "pending",
        "required": False,
        "api_key_id": None,
        "at": None,
        "note": None,
        "evaluation_ids": [],
        "seq": None,
    }
    events = api.count("registry_events")

    r = _review(api, 1, api.key_a)  # the importing key
    assert r.status_code == 403, r.text
    err = r.json()["error"]
    assert err["code"] == "self_review" and creator in err["message"], err
    assert _review(api, 1, api.key_a, "reject").json()["error"]["code"] == "self_review"  # a rejection too

    r = _review(api, 1, reviewer)  # another key, but nothing scored yet
    assert r.status_code == 409 and r.json()["error"]["code"] == "evaluation_required", r.text
    assert api.count("registry_events") == events  # nothing written by a refused review

    ev = _evaluated(api, v["id"])
    r = _review(api, 1, reviewer)
    assert r.status_code == 201, r.text
    review = r.json()
    assert review["decision"] == "approve" and review["api_key_id"] == reviewer_id and review["note"] == NOTE
    assert review["evaluation_ids"] == [ev] and (review["name"], review["version"]) == ("risk", 1)
    assert review["version_id"] == v["id"] and review["seq"] == 2
    approval = _approval(api)
    assert approval["state"] == "approved" and approval["api_key_id"] == reviewer_id
    assert approval["evaluation_ids"] == [ev] and approval["note"] == NOTE and approval["at"] == review["at"]

    r = _review(api, 1, reviewer, "reject", "rule 2 flags every low income as high risk: not acceptable")
    assert r.status_code == 201 and r.json()["evaluation_ids"] == [ev], r.text
    assert _approval(api)["state"] == "rejected"  # the latest review wins: the approval is withdrawn
    assert _approval(api, v["id"])["note"].startswith("rule 2")

    listed = api.client.get("/v1/registered-models/risk/events", headers=api.h()).json()["items"]
    reviewed = [e for e in listed if e["action"] == "version_reviewed"]
    assert [(e["decision"], e["to_version"], e["api_key_id"]) for e in reviewed] == [
        ("reject", 1, reviewer_id),
        ("approve", 1, reviewer_id),
    ]
    assert reviewed[1]["evaluation_ids"] == [ev] and reviewed[1]["note"] == NOTE
    assert all(e["decision"] is None and e["evaluation_ids"] is None for e in listed if e not in reviewed)


def test_the_gate_refuses_an_alias_on_a_version_not_approved(api: Api, doc) -> None:
    v1, v2 = api.import_model(doc), api.import_model(doc)
    _, reviewer = _reviewer(api)
    _policy(api, True)
    assert _approval(api)["required"] is True
    before = (api.count("registry_events"), api.count("model_aliases"))

    r = api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h())  # the probe's second call
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "version_not_approved" and "has not been reviewed" in err["message"], err
    r = api.client.put(f"{ALIAS}/production", json={"version_id": v1["id"]}, headers=api.h(reviewer))
    assert r.status_code == 409 and r.json()["error"]["code"] == "version_not_approved", r.text
    assert (api.count("registry_events"), api.count("model_aliases")) == before  # nothing changed, no event

    _evaluated(api, v1["id"])
    assert _review(api, 1, reviewer).status_code == 201
    r = api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h())
    assert r.status_code == 200 and r.json()["version"] == 1, r.text

    _evaluated(api, v2["id"])
    assert _review(api, 2, reviewer, "reject", "worse than version 1 on the holdout").status_code == 201
    r = api.client.put(f"{ALIAS}/production", json={"version": 2}, headers=api.h())
    assert r.status_code == 409 and "was rejected" in r.json()["error"]["message"], r.text
    assert _review(api, 2, reviewer, "approve", "re-scored on the 2026 file: better").status_code == 201
    assert api.client.put(f"{ALIAS}/production", json={"version": 2}, headers=api.h()).status_code == 200
    assert _review(api, 1, reviewer, "reject", "withdrawn: superseded by version 2").status_code == 201
    r = api.client.put(f"{ALIAS}/rollback", json={"version": 1}, headers=api.h())
    assert r.status_code == 409 and r.json()["error"]["code"] == "version_not_approved", r.text

    assert api.client.delete(f"{ALIAS}/production", headers=api.h()).status_code == 204  # removing stays allowed
    assert api.client.get("/v1/registered-models/risk", headers=api.h()).json()["aliases"] == {}

    _policy(api, False)  # off: everything behaves as before the gate
    r = api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h())
    assert r.status_code == 200, r.text


def test_without_the_policy_aliases_move_as_before(api: Api, doc) -> None:
    """Default off: an existing deployment changes nothing (the probe's two calls still work there)."""
    api.import_model(doc)
    r = api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h())
    assert r.status_code == 200, r.text
    approval = _approval(api, "risk@production")
    assert approval["required"] is False and approval["state"] == "pending"


def test_the_policy_is_per_tenant(api: Api, doc) -> None:
    api.import_model(doc)
    api.import_model(doc, key=api.key_b)
    _policy(api, True)
    r = api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h(api.key_b))
    assert r.status_code == 200, r.text  # tenant b's operator set nothing
    r = api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h())
    assert r.status_code == 409, r.text


def test_the_key_that_submitted_a_training_job_may_not_review_its_version(api: Api, doc) -> None:
    """A trained version's `version_created` event names the key that submitted the job (the worker passes it)."""
    from sqlalchemy import select

    from app.services import registry
    from app.tables import ApiKey

    submitter_id, submitter = _reviewer(api, "data scientist")
    db = api.app.state.service.db
    with db.sessionmaker() as s:
        assert s.scalar(select(ApiKey.tenant_id).where(ApiKey.id == submitter_id)) == api.tenant_a
        mv = registry.add_version(
            s,
            tenant_id=api.tenant_a,
            name="risk",
            document=doc,
            metrics={},
            provenance={},
            job_id="job_0123456789abcdef01234567",
            api_key_id=submitter_id,
        )
        s.commit()
        version_id = mv.id
    _evaluated(api, version_id)
    r = _review(api, 1, submitter)
    assert r.status_code == 403 and submitter_id in r.json()["error"]["message"], r.text
    assert _review(api, 1, api.key_a).status_code == 201  # the first key did not create it


def test_bad_reviews_are_refused_and_write_nothing(api: Api, doc) -> None:
    from app.admin import create_key

    api.import_model(doc)
    _, reviewer = _reviewer(api)
    events = api.count("registry_events")
    for body, field, code in [
        ({"decision": "approve", "note": ""}, "note", "invalid_input"),
        ({"decision": "approve"}, "note", "invalid_input"),
        ({"decision": "maybe", "note": NOTE}, "decision", "invalid_input"),
        ({"decision": "reject", "note": "   \n "}, "note", "invalid_note"),
        ({"decision": "reject", "note": "x" * 2001}, "note", "invalid_input"),
        ({"decision": "reject", "note": "fine \u202etxet desrever"}, "note", "invalid_note"),
        ({"decision": "reject", "note": NOTE, "by": "someone"}, "by", "invalid_input"),
    ]:
        r = api.client.post("/v1/registered-models/risk/versions/1/reviews", json=body, headers=api.h(reviewer))
        assert r.status_code == 422, (body, r.text)
        err = r.json()["error"]
        assert err["code"] == code and err["details"][0]["field"] == field, (body, err)
    r = _review(api, 1, reviewer, "reject", "multi-line notes\nare fine\tas are tabs")
    assert r.status_code == 201, r.text
    assert _review(api, 1, reviewer, "reject", "y" * 2000).status_code == 201
    events += 2
    assert _review(api, 2, reviewer).status_code == 404
    assert _review(api, 1, reviewer, name="nope").status_code == 404
    assert _review(api, 1, api.key_b).status_code == 404  # another tenant's model
    _, read_key = create_key(api.url, "tenant-a", "auditor", scope="read")
    r = _review(api, 1, read_key)
    assert r.status_code == 403 and r.json()["error"]["code"] == "key_scope", r.text
    assert api.count("registry_events") == events


def _events(api: Api) -> list[dict[str, Any]]:
    with api.app.state.service.db.engine.connect() as c:
        rows = c.execute(text("SELECT action, seq, decision FROM registry_events ORDER BY seq")).all()
    return [dict(r._mapping) for r in rows]


def _verify(api: Api) -> dict[str, Any]:
    r = api.client.get("/v1/audit/verify", headers=api.h())
    assert r.status_code == 200, r.text
    return r.json()["registry_events"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("tampering", "seq"),
    [
        ("UPDATE registry_events SET decision = 'approve' WHERE seq = 4", 4),  # a rejection turned into an approval
        ("UPDATE registry_events SET note = 'looked fine' WHERE seq = 3", 3),
        ("UPDATE registry_events SET evaluation_ids = 'ev_forged' WHERE seq = 3", 3),
        ("UPDATE registry_events SET api_key_id = 'key_someone_else' WHERE seq = 3", 3),
        ("UPDATE registry_events SET to_version = 2 WHERE seq = 3", 3),
    ],
)
def test_reviews_are_in_the_verified_chain(api: Api, doc, tampering: str, seq: int) -> None:
    from app.admin import verify_audit

    v = api.import_model(doc)
    _, reviewer = _reviewer(api)
    _evaluated(api, v["id"])
    api.import_model(doc)  # seq 2
    assert _review(api, 1, reviewer).status_code == 201  # seq 3
    assert _review(api, 1, reviewer, "reject", "second thoughts").status_code == 201  # seq 4
    assert [e["action"] for e in _events(api)][2:] == ["version_reviewed", "version_reviewed"]
    check = _verify(api)
    assert check == {"intact": True, "models_checked": 1, "events_checked": 4, "first_break": None}
    with api.app.state.service.db.engine.begin() as c:
        c.execute(text(tampering))
    brk = _verify(api)["first_break"]
    assert brk["kind"] == "content_hash_mismatch" and brk["seq"] == seq and brk["model"] == "risk", brk
    (report,) = [r for r in verify_audit(api.url, None) if r.tenant_id == api.tenant_a]
    assert not report.intact


def test_a_review_events_hash_covers_the_review_and_older_events_hash_as_before() -> None:
    from datetime import datetime

    from app.services.audit_chain import GENESIS

    row: dict[str, Any] = dict.fromkeys(registry_chain.BODY_COLUMNS)
    row.update(action="alias_set", at=datetime(2026, 11, 1, 12, 0), seq=1, prev_hash=GENESIS, model_name="risk")
    before = registry_chain.event_hash(row)
    assert registry_chain.event_hash({**row, "decision": None, "note": None, "evaluation_ids": None}) == before
    review = {**row, "action": "version_reviewed", "decision": "approve", "note": "ok", "evaluation_ids": "ev_1"}
    h = registry_chain.event_hash(review)
    for name, other in (("decision", "reject"), ("note", "ok!"), ("evaluation_ids", "ev_2")):
        assert registry_chain.event_hash({**review, name: other}) != h, name


RECORD = {"age": 67, "income": 50, "smoker": "yes"}


def test_under_the_policy_decisions_come_only_through_an_alias(api: Api, doc) -> None:
    """A review of the gate: with the policy on, `risk@latest`, `risk@2` and a version id still served a version
    nobody had reviewed (a backend calling `@latest` took every import live). A backend's `predict` key now decides
    only through an alias, which points only at approved versions; a person's `full` key still tries records on any
    version (the console's "Try a record" before approving); without the policy every reference decides as before."""
    from app.admin import create_key

    v1 = api.import_model(doc)
    v2 = api.import_model(doc)
    _, reviewer = _reviewer(api)
    _, backend = create_key(api.url, "tenant-a", "scoring backend", scope="predict")
    _evaluated(api, v1["id"])
    assert _review(api, 1, reviewer).status_code == 201
    _policy(api, True)
    assert api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h()).status_code == 200
    body = {"records": [RECORD]}
    audited = api.count("audit_log")
    for ref in ("risk@latest", "risk@2", "risk@1", v2["id"]):
        r = api.client.post(f"/v1/models/{ref}/predict", json=body, headers=api.h(backend))
        assert r.status_code == 403, (ref, r.text)
        assert r.json()["error"]["code"] == "alias_required" and repr(ref) in r.json()["error"]["message"]
        files = {"file": ("x.csv", b"age,income,smoker\n67,50,yes\n", "text/csv")}
        r = api.client.post(f"/v1/models/{ref}/predict.csv", files=files, headers=api.h(backend))
        assert r.status_code == 403 and r.json()["error"]["code"] == "alias_required", (ref, r.text)
    assert api.count("audit_log") == audited  # nothing decided
    r = api.client.post("/v1/models/risk@production/predict", json=body, headers=api.h(backend))
    assert r.status_code == 200 and r.json()["model_version"]["version"] == 1, r.text
    assert api.client.get("/v1/audit", headers=api.h()).json()["items"][0]["model_version_id"] == v1["id"]
    r = api.client.post(f"/v1/models/{v2['id']}/predict", json=body, headers=api.h())  # a person tries version 2
    assert r.status_code == 200 and r.json()["model_version"]["version"] == 2, r.text

    _policy(api, False)
    for ref in ("risk@latest", v2["id"]):
        assert api.client.post(f"/v1/models/{ref}/predict", json=body, headers=api.h(backend)).status_code == 200


def test_under_the_policy_a_version_serving_as_an_alias_is_not_rejected(api: Api, doc) -> None:
    """A rejection left the alias serving the rejected version; under the policy the alias moves first."""
    v1 = api.import_model(doc)
    _, reviewer = _reviewer(api)
    _evaluated(api, v1["id"])
    assert _review(api, 1, reviewer).status_code == 201
    _policy(api, True)
    assert api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h()).status_code == 200
    events = api.count("registry_events")
    r = _review(api, 1, reviewer, "reject", "rule 2 is wrong")
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["code"] == "version_in_use" and "risk@production" in err["message"], err
    assert api.count("registry_events") == events and _approval(api)["state"] == "approved"
    assert api.client.delete(f"{ALIAS}/production", headers=api.h()).status_code == 204
    assert _review(api, 1, reviewer, "reject", "rule 2 is wrong").status_code == 201


def test_turning_the_policy_on_names_the_aliases_that_serve_unapproved_versions(api: Api, doc) -> None:
    """The gate checks alias moves: an alias set before the policy keeps serving; the operator is told which."""
    from app.admin import set_policy

    v1 = api.import_model(doc)
    api.import_model(doc)
    assert api.client.put(f"{ALIAS}/production", json={"version": 1}, headers=api.h()).status_code == 200
    assert api.client.put(f"{ALIAS}/staging", json={"version": 2}, headers=api.h()).status_code == 200
    _, reviewer = _reviewer(api)
    _evaluated(api, v1["id"])
    assert _review(api, 1, reviewer).status_code == 201
    _, was_on, unapproved = set_policy(api.url, "tenant-a", True)
    assert was_on is False and unapproved == ["risk@staging (version 2)"]
