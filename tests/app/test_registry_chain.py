"""The registry events' hash chains: each model's alias changes and new versions are chained like decisions, and
`verify` (API and `neurules-admin verify-audit`) names an event changed, deleted or cut off, and aliases changed
around their events. A governance probe changed who moved `production`, deleted 280 events and re-pointed an alias
in the database: the verification said intact."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy import text

from app.services import registry_chain
from app.services.audit_chain import GENESIS
from tests.conftest import Api


def _events(api: Api) -> list[dict[str, Any]]:
    """The events as the ORM reads them (times as datetimes), in chain order."""
    from sqlalchemy import select

    from app.tables import RegistryEvent

    columns = [c.name for c in RegistryEvent.__table__.columns]
    with api.app.state.service.db.sessionmaker() as s:
        rows = s.scalars(select(RegistryEvent).order_by(RegistryEvent.seq))
        return [{name: getattr(e, name) for name in columns} for e in rows]


def _run(api: Api, *statements: str) -> None:
    with api.app.state.service.db.engine.begin() as c:
        for stmt in statements:
            c.execute(text(stmt))


def _history(api: Api, doc: dict[str, Any]) -> dict[str, Any]:
    """Two versions; production set, moved and removed; staging set: six events of model `risk`."""
    v1, v2 = api.import_model(doc), api.import_model(doc)
    base = "/v1/registered-models/risk/aliases"
    for method, alias, body in [
        ("PUT", "production", {"version": 1}),
        ("PUT", "production", {"version": 2}),
        ("DELETE", "production", None),
        ("PUT", "staging", {"version": 1}),
    ]:
        r = api.client.request(method, f"{base}/{alias}", json=body, headers=api.h())
        assert r.status_code in (200, 204), r.text
    return {"v1": v1, "v2": v2}


def _registry(api: Api) -> dict[str, Any]:
    r = api.client.get("/v1/audit/verify", headers=api.h())
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_each_models_events_form_one_chain_ending_at_its_head(api: Api, doc) -> None:
    _history(api, doc)
    events = _events(api)
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5, 6]
    assert events[0]["prev_hash"] == GENESIS
    assert all(b["prev_hash"] == a["row_hash"] for a, b in itertools.pairwise(events))
    assert all(registry_chain.event_hash(e) == e["row_hash"] for e in events)
    with api.app.state.service.db.engine.connect() as c:
        head = c.execute(text("SELECT events_seq, events_hash FROM registered_models WHERE name = 'risk'")).one()
    assert tuple(head) == (6, events[-1]["row_hash"])
    check = _registry(api)
    assert check["intact"] and check["registry_events"] == {
        "intact": True,
        "models_checked": 1,
        "events_checked": 6,
        "first_break": None,
    }


@pytest.mark.parametrize(
    ("tampering", "kind", "seq"),
    [
        ("UPDATE registry_events SET api_key_id = 'key_someone_else' WHERE seq = 3", "content_hash_mismatch", 3),
        ("UPDATE registry_events SET to_version = 1 WHERE seq = 4", "content_hash_mismatch", 4),
        ("DELETE FROM registry_events WHERE seq = 2", "sequence_gap", 3),
        ("DELETE FROM registry_events WHERE seq = 6", "truncated_tail", 6),
        ("UPDATE registry_events SET seq = 0 WHERE seq = 1", "sequence_before_start", 0),
        ("UPDATE model_aliases SET version_id = (SELECT id FROM model_versions WHERE version = 2)", None, 6),
        ("DELETE FROM model_aliases", None, 6),
        # a head no chain can hold (a probe's text seq made the verification a 500 on SQLite)
        (f"UPDATE registered_models SET events_hash = '{'z' * 64}'", "unreadable_head", 6),
    ],
)
def test_a_changed_registry_is_named(api: Api, doc, tampering: str, kind: str | None, seq: int) -> None:
    from app.admin import verify_audit

    _history(api, doc)
    _run(api, tampering)
    check = _registry(api)
    brk = check["registry_events"]["first_break"]
    assert not check["intact"] and check["first_break"] is None, check  # the decisions are fine
    assert brk["model"] == "risk" and brk["kind"] == (kind or "alias_state_mismatch") and brk["seq"] == seq, brk
    if kind is None:
        assert "'staging'" in brk["message"], brk
    (report,) = [r for r in verify_audit(api.url, None) if r.tenant_id == api.tenant_a]
    assert not report.intact and report.registry_events.first_break is not None


def test_an_alias_added_without_its_event_is_named(api: Api, doc) -> None:
    v = _history(api, doc)
    _run(
        api,
        "INSERT INTO model_aliases (registered_model_id, alias, version_id, updated_at) "
        f"SELECT registered_model_id, 'shadow', id, created_at FROM model_versions WHERE id = '{v['v2']['id']}'",
    )
    brk = _registry(api)["registry_events"]["first_break"]
    assert (
        brk["kind"] == "alias_state_mismatch"
        and "alias 'shadow' points at version 2 but no event set it" in (brk["message"])
    )


def test_alias_moves_while_the_registry_is_verified_raise_no_false_alarm(api: Api, doc) -> None:
    """A reviewer: the events, the head and the aliases were read in separate statements, so a move committing
    between them made `alias_state_mismatch` (249 false breaks in 1,100 checks on PostgreSQL). The aliases are
    compared on a read during which the model's head stayed put."""
    import threading
    import time

    from app.services import audit_verify

    _history(api, doc)
    stop = threading.Event()
    moves = {"n": 0}

    def mover() -> None:
        while not stop.is_set():
            for version in (1, 2):
                r = api.client.put(
                    "/v1/registered-models/risk/aliases/staging", json={"version": version}, headers=api.h()
                )
                assert r.status_code == 200, r.text
                moves["n"] += 1

    t = threading.Thread(target=mover)
    t.start()
    try:
        db = api.app.state.service.db
        breaks, checks, deadline = [], 0, time.monotonic() + 60
        while (moves["n"] < 40 or checks < 100) and time.monotonic() < deadline:
            checks += 1
            with db.sessionmaker() as s:
                report = audit_verify.verify_registry(s, api.tenant_a)
            if report.first_break is not None:
                breaks.append(report.first_break.message)
    finally:
        stop.set()
        t.join()
    assert moves["n"] >= 40 and breaks == [], (moves, checks, breaks[:3])


def test_a_versions_creation_record_erased_with_the_head_moved_back_is_named(api: Api, doc) -> None:
    """A distributed probe: deleting a model's newest event when it is a `version_created` and winding the model's
    head back one step left a consistent chain, and the verification said intact although the version remained.
    The model's versions are compared with the events that created them."""
    _history(api, doc)
    api.import_model(doc)  # version 3: the newest event (seq 7)
    last = _events(api)[-1]
    assert (last["action"], last["seq"], last["to_version"]) == ("version_created", 7, 3)
    _run(
        api,
        "DELETE FROM registry_events WHERE seq = 7",
        f"UPDATE registered_models SET events_seq = 6, events_hash = '{last['prev_hash']}' WHERE name = 'risk'",
    )
    brk = _registry(api)["registry_events"]["first_break"]
    assert brk["kind"] == "version_state_mismatch" and brk["message"] == "version 3 exists but no event created it"


def test_a_change_on_a_model_whose_head_was_moved_back_is_refused_not_a_500(api: Api, doc) -> None:
    """A distributed probe: with a model's head wound back one step in the database, the next alias move took a
    seq already used and answered a bare 500. It is a 409 naming the broken chain, and nothing is changed."""
    _history(api, doc)
    last = _events(api)[-1]
    _run(api, f"UPDATE registered_models SET events_seq = 5, events_hash = '{last['prev_hash']}' WHERE name = 'risk'")
    before = (api.count("registry_events"), api.count("model_versions"))
    r = api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 2}, headers=api.h())
    assert r.status_code == 409 and r.json()["error"]["code"] == "registry_chain_broken", r.text
    assert "head at seq 5, last event at seq 6" in r.json()["error"]["message"]
    r = api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h())
    assert r.status_code == 409 and r.json()["error"]["code"] == "registry_chain_broken", r.text
    assert (api.count("registry_events"), api.count("model_versions")) == before
    assert "production" not in api.client.get("/v1/registered-models/risk", headers=api.h()).json()["aliases"]


def test_a_versions_rule_list_is_sealed_in_its_chain(api: Api, doc) -> None:
    """A probe rewrote a stored rule list (rule 1 read `A15 >= 9999.5`): the service served the altered list and the
    verification said intact, so "fetch the exact rule list a decision was made with" could not be trusted. Each
    `version_created` event now carries the SHA-256 of the version's rule list inside its hash."""
    from sqlalchemy import select, update

    from app.tables import ModelVersion

    _history(api, doc)
    r = api.client.get("/v1/registered-models/risk/events", params={"limit": 50}, headers=api.h())
    assert r.status_code == 200, r.text
    created = {e["to_version"]: e for e in r.json()["items"] if e["action"] == "version_created"}
    for version in (1, 2):
        got = api.client.get(f"/v1/models/risk@{version}", headers=api.h())
        assert got.status_code == 200, got.text
        body = got.json()
        assert created[version]["content_sha256"] == registry_chain.version_sha256(body["rule_list"], body["text"])
    alias_events = [e for e in r.json()["items"] if e["action"] != "version_created"]
    assert alias_events and all(e["content_sha256"] is None for e in alias_events)
    assert _registry(api)["intact"]
    with api.app.state.service.db.engine.begin() as c:
        stored = c.execute(select(ModelVersion.rule_list).where(ModelVersion.version == 2)).scalar_one()
        stored["rules"][0]["conditions"][0]["high"] = 9999.5
        c.execute(update(ModelVersion).where(ModelVersion.version == 2).values(rule_list=stored))
    check = _registry(api)
    brk = check["registry_events"]["first_break"]
    assert not check["intact"] and brk["kind"] == "version_content_mismatch", check
    assert brk["model"] == "risk" and brk["seq"] == created[2]["seq"] and "version 2" in brk["message"]


def test_an_event_without_a_seal_hashes_as_before() -> None:
    """Events recorded before migration 0009 have no `content_sha256`: their hash must not change with it."""
    import hashlib
    import json
    from datetime import datetime

    row = dict.fromkeys(registry_chain.BODY_COLUMNS)
    row.update(action="alias_set", alias="production", at=datetime(2026, 11, 1, 12, 0), seq=3, prev_hash="a" * 64)
    body = {**{k: row[k] for k in registry_chain.BODY_COLUMNS}, "at": "2026-11-01T12:00:00.000000Z"}
    before = hashlib.sha256(
        f"neurules.registry.v1\n3\n{'a' * 64}\n{json.dumps(body, sort_keys=True, separators=(',', ':'))}".encode()
    ).hexdigest()
    assert registry_chain.event_hash({**row, "content_sha256": None}) == before == registry_chain.event_hash(row)
    assert registry_chain.event_hash({**row, "content_sha256": "b" * 64}) != before


def test_a_versions_text_is_sealed_too(api: Api, doc) -> None:
    """The rules as text are what a reviewer reads: changed in the database, the version reads otherwise than it
    decides, and the seal says so."""
    _history(api, doc)
    _run(api, "UPDATE model_versions SET text = 'if true then risk = low' WHERE version = 1")
    brk = _registry(api)["registry_events"]["first_break"]
    assert brk["kind"] == "version_content_mismatch" and "version 1" in brk["message"], brk


def test_two_models_names_swapped_in_the_database_are_named(api: Api, doc) -> None:
    """A governance probe swapped two models' names in the database: `risk@production` then served the other
    model's version and the verification said intact (events named models by id). Every event carries its model's
    name inside its hash since migration 0010."""
    _history(api, doc)
    api.import_model(doc, name="other")
    r = api.client.get("/v1/registered-models/risk/events", params={"limit": 50}, headers=api.h())
    assert r.status_code == 200 and {e["model_name"] for e in r.json()["items"]} == {"risk"}, r.text
    assert _registry(api)["intact"]
    _run(
        api,
        "UPDATE registered_models SET name = 'swap' WHERE name = 'risk'",
        "UPDATE registered_models SET name = 'risk' WHERE name = 'other'",
        "UPDATE registered_models SET name = 'other' WHERE name = 'swap'",
    )
    check = _registry(api)
    brk = check["registry_events"]["first_break"]
    assert not check["intact"] and brk["kind"] == "model_name_mismatch", check
    assert brk["model"] == "other" and "'risk'" in brk["message"] and brk["seq"] == 1, brk


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("metrics", '{"train": {"weighted_f1": 0.99}}'),
        ("provenance", '{"source": "someone else"}'),
        ("input_schema", "[]"),
        ("metrics", '{"train": 1, "train": 2}'),  # a key twice: no longer what was sealed
    ],
)
def test_a_versions_metrics_schema_and_provenance_are_sealed(api: Api, doc, column: str, value: str) -> None:
    """What a reviewer promotes a version by (its scores, the fields it reads, the training file's digest) was
    outside the seal: changed in the database, the verification said intact."""
    _history(api, doc)
    r = api.client.get("/v1/registered-models/risk/events", params={"limit": 50}, headers=api.h())
    created = {e["to_version"]: e for e in r.json()["items"] if e["action"] == "version_created"}
    body = api.client.get("/v1/models/risk@2", headers=api.h()).json()
    sealed = registry_chain.details_sha256(body["metrics"], body["input_schema"], body["provenance"])
    assert created[2]["details_sha256"] == sealed, (created[2], body)
    _run(api, f"UPDATE model_versions SET {column} = '{value}' WHERE version = 2")
    brk = _registry(api)["registry_events"]["first_break"]
    assert brk["kind"] == "version_details_mismatch" and "version 2" in brk["message"], brk
    assert brk["seq"] == created[2]["seq"]


def test_an_event_without_a_name_or_details_hashes_as_before() -> None:
    """Events recorded before migration 0010 (or by an older release) carry neither: their hash must not change."""
    from datetime import datetime

    row: dict[str, Any] = dict.fromkeys(registry_chain.BODY_COLUMNS)
    row.update(action="version_created", at=datetime(2026, 11, 1, 12, 0), seq=1, prev_hash=GENESIS)
    before = registry_chain.event_hash(row)
    assert registry_chain.event_hash({**row, "model_name": None, "details_sha256": None}) == before
    assert registry_chain.event_hash({**row, "model_name": "risk"}) != before
    assert registry_chain.event_hash({**row, "details_sha256": "c" * 64}) != before


def test_an_alias_pointed_at_another_models_version_is_named_and_not_served(api: Api, doc) -> None:
    """A reviewer re-pointed `risk@production` in the database at the version 1 of another model: the alias
    compared by version number (1 = 1) and verified intact, and `risk@production` served the other model."""
    _history(api, doc)
    r = api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=api.h())
    assert r.status_code == 200, r.text
    other = api.import_model(doc, name="other")
    assert _registry(api)["intact"]
    _run(api, f"UPDATE model_aliases SET version_id = '{other['id']}' WHERE alias = 'production'")
    brk = _registry(api)["registry_events"]["first_break"]
    assert brk["kind"] == "alias_state_mismatch" and brk["model"] == "risk", brk
    assert "'production'" in brk["message"] and other["id"] in brk["message"], brk
    for path in ("/v1/models/risk@production", "/v1/models/risk@production/predict"):
        body = {"records": [{}]} if path.endswith("predict") else None
        got = api.client.request("POST" if body else "GET", path, json=body, headers=api.h())
        assert got.status_code == 409 and got.json()["error"]["code"] == "alias_state_mismatch", got.text
