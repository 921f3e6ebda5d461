"""Counterfactuals as an option of predict, exact through the API; one audit row per decision; and the
Prometheus decision counter against the decisions returned on both predict paths."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter

import pytest

from models.counterfactual import apply_changes
from tests.app.governance_helpers import csv_bytes, labelled_rows, predict, records_of


def test_applying_the_change_gives_the_promised_class_and_rule(api, doc) -> None:
    v = api.import_model(doc)
    records = records_of(labelled_rows(40, seed=11))
    records[0]["age"] = None  # a missing number: the change replaces the fill value
    before = api.count("audit_log")
    answers = predict(api, v["id"], records, explain="counterfactual")
    assert api.count("audit_log") == before + len(records)  # the counterfactual is not a decision
    found = 0
    for rec, p in zip(records, answers, strict=True):
        cf = p["counterfactual"]
        assert p["explanation"]["rule_id"] == p["rule_id"]
        assert cf["found"] and cf["exact"] and cf["prediction"] != p["prediction"]
        assert cf["n_changes"] == len(cf["changes"]) >= 1
        assert all(c["from"] == rec[c["feature"]] for c in cf["changes"])
        changed = apply_changes(rec, {c["feature"]: c["to"] for c in cf["changes"]})
        (again,) = predict(api, v["id"], [changed], explain="none")
        assert (again["prediction"], again["rule_id"]) == (cf["prediction"], cf["rule_id"])
        assert again["probabilities"] == cf["probabilities"]
        found += 1
    assert found == len(records)


def test_no_change_can_flip_a_list_of_one_class(api, doc) -> None:
    for rule in doc["rules"]:
        rule["class_counts"], rule["probabilities"] = [40, 3], [41 / 45, 4 / 45]
    v = api.import_model(doc)
    (p,) = predict(api, v["id"], [{"age": 70, "income": 5, "smoker": "yes"}], explain="counterfactual")
    assert p["counterfactual"]["found"] is False and "predicts" in p["counterfactual"]["reason"]


def test_explain_modes(api, doc) -> None:
    v = api.import_model(doc)
    rec = {"age": 70, "income": 50, "smoker": "yes"}
    (p,) = predict(api, v["id"], [rec])
    assert p["explanation"] and "counterfactual" not in p
    (p,) = predict(api, v["id"], [rec], explain="none")
    assert "explanation" not in p and "counterfactual" not in p
    r = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [rec], "explain": "yes"}, headers=api.h())
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "explain"


@pytest.mark.parametrize(
    ("query", "body", "shown"),
    [
        ("false", None, set()),
        ("false", "none", set()),
        ("true", None, {"explanation"}),
        ("true", "rules", {"explanation"}),
        ("true", "counterfactual", {"explanation", "counterfactual"}),
        ("false", "rules", None),
        ("false", "counterfactual", None),
        ("true", "none", None),
    ],
)
def test_explain_in_query_and_body(sqlite_api, doc, query: str, body: str | None, shown: set[str] | None) -> None:
    """The query's `explain` and the body's agree, or the request is a 422 naming both: `?explain=false` with a
    body asking for a counterfactual answered 200 without one (the query won), `?explain=true` with
    `"explain": "none"` answered without an explanation (the body won), and nothing was said."""
    api = sqlite_api
    v = api.import_model(doc)
    rec = {"age": 70, "income": 50, "smoker": "yes"}
    sent = {"records": [rec]} | ({} if body is None else {"explain": body})
    r = api.client.post(f"/v1/models/{v['id']}/predict", params={"explain": query}, json=sent, headers=api.h())
    if shown is None:
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "conflicting_explain", err
        assert [d["field"] for d in err["details"]] == ["query.explain", "explain"], err
        assert api.count("audit_log") == 0
    else:
        assert r.status_code == 200, r.text
        (p,) = r.json()["predictions"]
        assert {"explanation", "counterfactual"} & {k for k, x in p.items() if x is not None} == shown, p


def _decision_counts(api) -> dict[str, float]:
    text = api.client.get("/metrics").text
    pattern = r'neurules_decisions_total\{model="risk",rule="(\d+)",tenant="([^"]+)",version="1"\} (\S+)'
    out: dict[str, float] = {}
    for rule, tenant, value in re.findall(pattern, text):
        assert tenant == api.tenant_a
        out[rule] = float(value)
    return out


def test_prometheus_counts_every_decision_returned_on_both_paths(api, doc) -> None:
    v = api.import_model(doc)
    rows = labelled_rows(60, seed=2)
    decided: Counter[str] = Counter()
    for i in range(0, 30, 7):  # JSON requests of several sizes, one record included
        for p in predict(api, v["id"], records_of(rows[i : i + 1 + i % 5]), explain="none"):
            decided[str(p["rule_id"])] += 1
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        params={"ignore_extra": "true"},
        files={"file": ("b.csv", csv_bytes(rows[30:]), "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 200, r.text
    decided.update(row["rule_id"] for row in csv.DictReader(io.StringIO(r.text)))
    bad = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [{"age": 1}]}, headers=api.h())
    assert bad.status_code == 422  # refused: no decision, nothing counted
    counts = _decision_counts(api)
    assert {k: c for k, c in counts.items() if c} == {k: float(n) for k, n in decided.items()}
    assert sum(counts.values()) == api.count("audit_log") == sum(decided.values())
