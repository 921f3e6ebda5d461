"""Monitoring through the API: counts equal the decisions made (JSON and CSV), per version and rule, in
the right time bucket, with the missing-filled share, the drift score and its alert; tenants apart."""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.app.governance_helpers import csv_bytes, labelled_rows, predict, records_of

TRAINING = {1: 43, 2: 30, 0: 150}  # the hand-written list's rule supports


def _psi(actual: dict[int, int], expected: dict[int, int]) -> float:
    """sum((a - e) ln(a / e)) over the shares, 0.5 / n for an empty cell (docs/governance-api.md)."""
    n_a, n_e = sum(actual.values()), sum(expected.values())
    total = 0.0
    for j, e in expected.items():
        a = actual.get(j, 0)
        if a or e:
            pa, pe = (a or 0.5) / n_a, (e or 0.5) / n_e
            total += (pa - pe) * math.log(pa / pe)
    return total


def _monitoring(api, ref: str, key: str | None = None, **params: Any):
    return api.client.get(f"/v1/models/{ref}/monitoring", params=params, headers=api.h(key))


def test_counts_equal_the_decisions_made(api, doc) -> None:
    start = datetime.now(UTC)
    v1 = api.import_model(doc)
    rows = labelled_rows(90, seed=4)
    for r in rows[:12]:
        r[0] = None  # a missing number: filled (counted); a missing category is not
    rows[12][2] = None
    made: Counter[int] = Counter()
    for i in range(0, 40, 8):
        made.update(p["rule_id"] for p in predict(api, v1["id"], records_of(rows[i : i + 8]), explain="none"))
    r = api.client.post(
        f"/v1/models/{v1['id']}/predict.csv",
        params={"ignore_extra": "true"},
        files={"file": ("b.csv", csv_bytes(rows[40:70]), "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 200, r.text
    made.update(int(line.split(",")[3]) for line in r.text.splitlines()[1:])
    v2 = api.import_model(doc)
    api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 2}, headers=api.h())
    made_v2 = Counter(p["rule_id"] for p in predict(api, "risk@production", records_of(rows[70:])))
    end = datetime.now(UTC)

    # a window of 4 hours in 4 buckets: every decision of the last seconds falls in the second one
    since, until = start - timedelta(minutes=90), start + timedelta(minutes=150)
    r = _monitoring(api, "risk@1", since=since.isoformat(), until=until.isoformat(), buckets=4)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == "risk" and body["total"] == 90 == api.count("audit_log")
    assert (body["alert_threshold"], body["drift_min_decisions"], body["drift_min_decisions_per_rule"]) == (
        0.2,
        100,
        10,
    )
    new, old = body["versions"]  # newest version first
    assert (new["version_id"], new["aliases"], new["total"]) == (v2["id"], ["production"], 20)
    assert (old["version_id"], old["aliases"], old["total"]) == (v1["id"], [], 70)
    assert {r["rule_id"]: r["count"] for r in old["rules"]} == {j: made.get(j, 0) for j in (1, 2, 0)}
    assert {r["rule_id"]: r["count"] for r in new["rules"]} == {j: made_v2.get(j, 0) for j in (1, 2, 0)}
    assert [r["rule_id"] for r in old["rules"]] == [1, 2, 0]
    assert [r["training_share"] for r in old["rules"]] == [TRAINING[j] / 223 for j in (1, 2, 0)]
    assert old["missing_filled_share"] == 12 / 70 and new["missing_filled_share"] == 0.0
    assert math.isclose(old["drift_psi"], _psi(dict(made), TRAINING), rel_tol=1e-12)
    # 70 and 20 decisions: below the default minimum (100), so the PSI is shown but not judged
    assert [(b["drift_state"], b["alert"], b["min_decisions"]) for b in (new, old)] == [
        ("insufficient_data", False, 100)
    ] * 2
    assert [b["total"] for b in old["series"]] == [0, 70, 0, 0]
    assert old["series"][1]["shares"] == {str(j): n / 70 for j, n in made.items()}
    assert datetime.fromisoformat(old["series"][1]["start"]) <= end

    # the default window (the last 7 days) holds them too; a window before them holds nothing
    assert _monitoring(api, "risk@latest").json()["total"] == 90
    earlier = _monitoring(api, "risk@2", until=(start - timedelta(seconds=1)).isoformat()).json()
    assert earlier["total"] == 0 and earlier["versions"] == []


def test_alert_follows_the_configured_threshold(tmp_path, doc) -> None:
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", drift_alert_psi=0.01, drift_min_decisions=10, drift_min_decisions_per_rule=0)
    api = next(gen)
    try:
        v = api.import_model(doc)
        predict(api, v["id"], [{"age": 70, "income": 50, "smoker": "yes"}] * 9)  # all rule 1: drifted
        (block,) = _monitoring(api, v["id"]).json()["versions"]
        assert block["drift_psi"] > 0.01 and block["alert"] is False  # 9 decisions: not judged yet
        assert (block["drift_state"], block["min_decisions"]) == ("insufficient_data", 10)
        predict(api, v["id"], [{"age": 70, "income": 50, "smoker": "yes"}])
        body = _monitoring(api, v["id"]).json()
        (block,) = body["versions"]
        assert block["drift_psi"] > 0.01 and block["alert"] is True and block["drift_state"] == "alert"
        assert (body["alert_threshold"], body["drift_min_decisions"], body["drift_min_decisions_per_rule"]) == (
            0.01,
            10,
            0,
        )
    finally:
        gen.close()


def test_bad_windows_and_other_tenants(api, doc) -> None:
    v = api.import_model(doc)
    predict(api, v["id"], [{"age": 70, "income": 50, "smoker": "yes"}])
    now = datetime.now(UTC)
    r = _monitoring(api, v["id"], since=now.isoformat(), until=(now - timedelta(hours=1)).isoformat())
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "query.until"
    for params in ({"buckets": 0}, {"buckets": 1001}, {"since": "yesterday"}):
        assert _monitoring(api, v["id"], **params).status_code == 422, params
    naive = _monitoring(api, v["id"], since=(now - timedelta(hours=1)).replace(tzinfo=None).isoformat())
    assert naive.status_code == 200 and naive.json()["total"] == 1  # naive times are UTC
    assert _monitoring(api, v["id"], key=api.key_b).status_code == 404
    assert _monitoring(api, "risk@latest", key=api.key_b).status_code == 404
    vb = api.import_model(doc, key=api.key_b)  # the same name in tenant b: its own, empty trail
    assert _monitoring(api, vb["id"], key=api.key_b).json()["total"] == 0


def test_windows_at_the_ends_of_the_calendar_are_refused_not_500(api, doc) -> None:
    """A window edge that cannot be a UTC time (year 1 with an eastern offset, year 9999 with a western one,
    or the default 7 days before a `until` in the first week of year 1) is a 422 naming the field."""
    v = api.import_model(doc)
    for params, field in (
        ({"since": "0001-01-01T00:00:00+01:00"}, "query.since"),
        ({"until": "9999-12-31T23:59:59-01:00"}, "query.until"),
        ({"until": "0001-01-02T00:00:00Z"}, "query.until"),
    ):
        r = _monitoring(api, v["id"], **params)
        assert r.status_code == 422, (params, r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == "invalid_input" and err["details"][0]["field"] == field, (params, err)
    edges = _monitoring(api, v["id"], since="0001-01-01T00:00:00Z", until="9999-12-31T23:59:59Z")
    assert edges.status_code == 200 and edges.json()["total"] == 0


def test_a_since_in_the_future_or_not_a_time_names_since_in_plain_words(sqlite_api, doc) -> None:
    """`?since=2030-01-01T00:00:00Z` alone answered "until: must be after since", naming a parameter never
    sent; `?since=abc` answered pydantic's "Input should be a valid datetime or date, input is too short".
    Both now name `query.since` (as FastAPI names its own checks of it), in words a user can act on."""
    api = sqlite_api
    v = api.import_model(doc)
    future = (datetime.now(UTC) + timedelta(days=400)).isoformat()
    r = _monitoring(api, v["id"], since=future)
    assert r.status_code == 422, r.text
    detail = r.json()["error"]["details"][0]
    assert detail["field"] == "query.since" and "is in the future" in detail["message"], detail
    # a bare number was read as Unix time (in milliseconds above 2e10: `99999999999` became a window in 1973)
    for bad in ("abc", "2026-13-01T00:00:00Z", "yesterday", "1764400000", "99999999999", "1.5e9", " 17 "):
        for name in ("since", "until"):
            r = _monitoring(api, v["id"], **{name: bad})
            assert r.status_code == 422, r.text
            detail = r.json()["error"]["details"][0]
            assert detail == {
                "field": f"query.{name}",
                "message": "must be an ISO 8601 date-time, e.g. 2026-11-27T10:00:00Z",
            }
    later = (datetime.now(UTC) + timedelta(days=401)).isoformat()
    r = _monitoring(api, v["id"], since=future, until=later)  # a window in the future, both given: empty, not refused
    assert r.status_code == 200 and r.json()["total"] == 0, r.text


def test_a_decision_on_a_bucket_edge_is_in_the_bucket_it_starts(api, doc) -> None:
    """On SQLite the bucket came from julianday(), which rounds to the millisecond: decisions within about
    0.5 ms of an edge fell in the bucket before or after it (a probe: [100, 110] for [50, 160]). Buckets are
    now computed in whole microseconds from the stored time, on both databases, as `bucket_of` does."""
    v = api.import_model(doc)
    predict(api, v["id"], records_of(labelled_rows(6, seed=1)))
    items = api.client.get("/v1/audit", headers=api.h()).json()["items"]
    at = datetime.fromisoformat(items[0]["created_at"])  # all six share one time: one audit batch
    assert {i["created_at"] for i in items} == {items[0]["created_at"]}
    for edge, expected in ((at, [0, 6]), (at + timedelta(microseconds=1), [6, 0])):
        since, until = edge - timedelta(seconds=3), edge + timedelta(seconds=3)
        body = _monitoring(api, "risk@1", since=since.isoformat(), until=until.isoformat(), buckets=2).json()
        assert [b["total"] for b in body["versions"][0]["series"]] == expected, (edge, body["versions"][0]["series"])
