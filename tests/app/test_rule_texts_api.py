"""A condition reads the same everywhere the service writes it: the version's `condition_texts` (what the
console draws), its `text`, a prediction's explanation, an evaluation's and monitoring's `rule_text` and a
comparison's rule texts. The explanation is written by `models.RuleList.explain`; every other text comes
from `app/services/rule_texts.py`, so the two must agree (e.g. a 0/1 column read as `x = 1`)."""

from __future__ import annotations

import copy
from typing import Any

from tests.app.governance_helpers import csv_bytes, evaluate, predict, upload

HEADER = ["age", "smokes", "region", "risk"]


def _doc() -> dict[str, Any]:
    """Three rules over a numeric range, a two-valued 0/1 column (with its training `values`) and a category."""
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "risk",
        "classes": ["low", "high"],
        "features": [
            {"name": "age", "type": "numeric", "fill_value": 50.0, "min": 20.0, "max": 80.0},
            {"name": "smokes", "type": "numeric", "fill_value": 0.0, "min": 0.0, "max": 1.0, "values": [0.0, 1.0]},
            {"name": "region", "type": "categorical", "categories": ["north", "south", None]},
        ],
        "rules": [
            {
                "conditions": [
                    {"feature": "age", "op": "between", "low": 45.5, "high": 66.25},
                    {"feature": "smokes", "op": "between", "low": 0.5, "high": None},
                ],
                "class_counts": [3, 40],
                "probabilities": [4 / 45, 41 / 45],
            },
            {
                "conditions": [
                    {"feature": "smokes", "op": "between", "low": None, "high": 0.5},
                    {"feature": "region", "op": "not_in", "values": ["north", None]},
                ],
                "class_counts": [30, 4],
                "probabilities": [31 / 36, 5 / 36],
            },
            {
                "conditions": [{"feature": "age", "op": "between", "low": None, "high": 30.0}],
                "class_counts": [10, 20],
                "probabilities": [11 / 32, 21 / 32],
            },
        ],
        "default": {"class_counts": [120, 30], "probabilities": [121 / 152, 31 / 152]},
        "smoothing": 1.0,
        "metadata": {},
    }


RECORDS = [  # one reaching each rule, and the default rule
    {"age": 50, "smokes": 1, "region": "north"},
    {"age": 50, "smokes": 0, "region": "south"},
    {"age": 25, "smokes": 1, "region": "north"},
    {"age": 70, "smokes": 0, "region": "north"},
]


def test_a_condition_reads_the_same_everywhere(api) -> None:
    v = api.import_model(_doc(), name="texts")
    body = api.client.get(f"/v1/models/{v['id']}", headers=api.h()).json()
    texts: list[list[str]] = body["condition_texts"]
    assert [len(t) for t in texts] == [2, 2, 1]
    rule_text = {j + 1: " and ".join(t) for j, t in enumerate(texts)} | {0: "else"}
    for j in (1, 2, 3):
        assert rule_text[j] in body["text"]

    # explanations (models.RuleList.explain): the fired rule's conditions and each earlier failed condition
    for p in predict(api, v["id"], RECORDS):
        ex = p["explanation"]
        if not ex["is_default"]:
            assert [c["text"] for c in ex["conditions"]] == texts[ex["rule_id"] - 1]
            assert ex["rule_text"] == rule_text[ex["rule_id"]]
        for nf in ex["not_fired"]:
            assert nf["failed_condition"]["text"] in texts[nf["rule_id"] - 1]
            assert nf["rule_text"] == rule_text[nf["rule_id"]]
    assert sorted(p["rule_id"] for p in predict(api, v["id"], RECORDS)) == [0, 1, 2, 3]

    # an evaluation and monitoring name each rule with the same text
    rows = [[r["age"], r["smokes"], r["region"], "low"] for r in RECORDS]
    ds = upload(api, csv_bytes(rows, HEADER))
    ev = evaluate(api, v["id"], dataset_id=ds["id"]).json()
    assert {r["rule_id"]: r["rule_text"] for r in ev["rules"]} == rule_text
    mon = api.client.get(f"/v1/models/{v['id']}/monitoring", headers=api.h()).json()
    assert {r["rule_id"]: r["rule_text"] for r in mon["versions"][0]["rules"]} == rule_text

    # a comparison with a version whose first rule moved its age range
    other = copy.deepcopy(_doc())
    other["rules"][0]["conditions"][0]["high"] = 70.0
    v2 = api.import_model(other, name="texts")
    v2_texts = api.client.get(f"/v1/models/{v2['id']}", headers=api.h()).json()["condition_texts"]
    cmp = api.client.get(f"/v1/models/{v['id']}/compare", params={"other": v2["id"]}, headers=api.h()).json()
    (changed,) = cmp["rules"]["changed"]
    assert changed["base_text"] == rule_text[1] and changed["other_text"] == " and ".join(v2_texts[0])
    assert changed["conditions"]["changed"] == [{"feature": "age", "base": texts[0][0], "other": v2_texts[0][0]}]
    assert [u["text"] for u in cmp["rules"]["unchanged"]] == [rule_text[2], rule_text[3]]
