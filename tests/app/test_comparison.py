"""Comparing two versions: the rule-level diff, and both versions on one table."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from sklearn.metrics import confusion_matrix

from app.services.comparison import compare_on_table, diff_rule_lists
from app.services.evaluation import EvaluationInputError, evaluate_table, typed_records
from models.rulelist import Condition, RuleList, smoothed_probabilities
from tests.app.test_evaluation import FEATURES, _rows, _rule_list, _table
from tests.models.test_counterfactual import rule_lists

YES, NO = [1, 9], [9, 1]  # class counts of a rule predicting 1 / 0


def _doc(rules: list[tuple[list[dict[str, Any]], list[int]]], default: list[int] = NO) -> RuleList:
    def entry(counts: list[int]) -> dict[str, Any]:
        return {"class_counts": counts, "probabilities": list(smoothed_probabilities(counts, 1.0))}

    return RuleList.from_dict(
        {
            "format": "neurules.rulelist",
            "version": 1,
            "classes": [0, 1],
            "features": [
                {"name": "age", "type": "numeric", "fill_value": 50.0},
                {"name": "chol", "type": "numeric", "fill_value": 240.0},
                {"name": "sex", "type": "categorical", "categories": ["0", "1"]},
                {"name": "thal", "type": "categorical", "categories": ["normal", "fixed", "reversable"]},
            ],
            "rules": [{"conditions": conds, **entry(counts)} for conds, counts in rules],
            "default": entry(default),
        }
    )


def between(feature: str, low: float | None = None, high: float | None = None) -> dict[str, Any]:
    return {"feature": feature, "op": "between", "low": low, "high": high}


def member(feature: str, op: str, *values: str) -> dict[str, Any]:
    return {"feature": feature, "op": op, "values": list(values)}


BASE = _doc(
    [
        ([between("age", 55.5), member("thal", "in", "reversable")], YES),
        ([between("chol", high=210.5)], YES),
        ([member("thal", "not_in", "normal"), between("age", 40.5, 60.5)], NO),
    ]
)
OTHER = _doc(
    [
        ([member("thal", "in", "reversable"), between("age", 55.5)], YES),  # same conditions, other order
        ([member("sex", "in", "1")], YES),
        ([between("chol", high=250.5), between("age", 60.0)], YES),
    ],
    default=[12, 3],
)


def test_rules_are_matched_and_diffed_condition_by_condition() -> None:
    out = diff_rule_lists(BASE, OTHER)
    rules = out["rules"]
    assert rules["unchanged"] == [
        {"base_rule_id": 1, "other_rule_id": 1, "text": "age >= 55.5 and thal in {reversable}"}
    ]
    assert rules["changed"] == [
        {
            "base_rule_id": 2,
            "other_rule_id": 3,
            "base_text": "chol <= 210.5",
            "other_text": "chol <= 250.5 and age >= 60",
            "prediction": {"base": 1, "other": 1},
            "conditions": {
                "added": ["age >= 60"],
                "removed": [],
                "changed": [{"feature": "chol", "base": "chol <= 210.5", "other": "chol <= 250.5"}],
            },
        }
    ]
    assert rules["added"] == [{"other_rule_id": 2, "text": "sex in {1}"}]
    assert rules["removed"] == [{"base_rule_id": 3, "text": "thal not in {normal} and 40.5 <= age <= 60.5"}]
    assert out["default"] == {"base": {"prediction": 0, "support": 10}, "other": {"prediction": 0, "support": 15}}


def test_same_conditions_with_another_prediction_are_a_change() -> None:
    flipped = _doc([([between("chol", high=210.5)], NO)])
    out = diff_rule_lists(_doc([([between("chol", high=210.5)], YES)]), flipped)
    assert out["rules"]["changed"][0]["prediction"] == {"base": 1, "other": 0}
    assert out["rules"]["changed"][0]["conditions"] == {"added": [], "removed": [], "changed": []}
    assert out["rules"]["unchanged"] == out["rules"]["added"] == out["rules"]["removed"] == []


def test_repeated_feature_and_op_conditions_pair_up_in_order() -> None:
    base = _doc([([between("age", 30.0), between("age", high=60.0), member("thal", "in", "fixed", "normal")], YES)])
    other = _doc([([between("age", 35.0), between("age", high=60.0), member("thal", "in", "normal", "fixed")], YES)])
    changed = diff_rule_lists(base, other)["rules"]["changed"]
    assert changed[0]["conditions"] == {
        "added": [],
        "removed": [],
        "changed": [{"feature": "age", "base": "age >= 30", "other": "age >= 35"}],
    }


def test_same_prediction_comes_first_then_nearby_position() -> None:
    base = _doc([([between("age", 60.0)], YES)])
    other = _doc([([between("age", 60.0)], NO), ([between("age", 50.0), member("sex", "in", "1")], YES)])
    rules = diff_rule_lists(base, other)["rules"]
    assert [(e["base_rule_id"], e["other_rule_id"]) for e in rules["changed"]] == [(1, 2)]
    assert rules["added"] == [{"other_rule_id": 1, "text": "age >= 60"}]
    base = _doc(
        [([member("sex", "in", "1")], YES), ([between("chol", high=200.0)], YES), ([between("age", 60.0)], YES)]
    )
    other = _doc([([between("age", 65.0)], YES), ([member("sex", "in", "1")], YES), ([between("age", 70.0)], YES)])
    rules = diff_rule_lists(base, other)["rules"]
    assert [(e["base_rule_id"], e["other_rule_id"]) for e in rules["changed"]] == [(3, 3)]
    assert [(e["base_rule_id"], e["other_rule_id"]) for e in rules["unchanged"]] == [(1, 2)]
    assert [e["other_rule_id"] for e in rules["added"]] == [1]
    assert [e["base_rule_id"] for e in rules["removed"]] == [2]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_lists(), rule_lists())
def test_every_rule_is_accounted_for_once(base: RuleList, other: RuleList) -> None:
    rules = diff_rule_lists(base, other)["rules"]
    base_ids = [e["base_rule_id"] for kind in ("unchanged", "changed", "removed") for e in rules[kind]]
    other_ids = [e["other_rule_id"] for kind in ("unchanged", "changed", "added") for e in rules[kind]]
    assert sorted(base_ids) == list(range(1, len(base.rules) + 1))
    assert sorted(other_ids) == list(range(1, len(other.rules) + 1))
    itself = diff_rule_lists(base, base)["rules"]  # a list against itself: every rule with itself
    assert [(e["base_rule_id"], e["other_rule_id"]) for e in itself["unchanged"]] == [
        (j, j) for j in range(1, len(base.rules) + 1)
    ]
    assert itself["changed"] == itself["added"] == itself["removed"] == []


def _other_version(classes: int = 2) -> RuleList:
    rows = _rows(300, seed=11, classes=classes)
    X = {f.name: np.array([r[i] for r in rows], dtype=object) for i, f in enumerate(FEATURES)}
    rules = [(Condition("age", "between", low=60.5),), (Condition("chol", "between", high=190.5),)]
    return RuleList.build(classes=list(range(classes)), features=FEATURES, rules=rules, X=X, y=[r[3] for r in rows])


def test_both_versions_on_one_table() -> None:
    base, other = _rule_list(), _other_version()
    rows = _rows(300, seed=12)
    rows[0][3], rows[1][3] = None, "5"  # left out of the metrics, kept in the disagreement
    table = _table(rows)
    out = compare_on_table(base, other, table, "target")
    records = typed_records(base, table)
    pb, po = base.predict(records), other.predict(records)
    assert out["n_rows"] == 300
    assert out["n_disagree"] == int(np.sum(pb != po)) > 0
    assert out["disagreement"] == pytest.approx(out["n_disagree"] / 300)
    assert out["crosstab"] == {"labels": [0, 1], "matrix": confusion_matrix(pb, po, labels=[0, 1]).tolist()}
    assert out["n_scored"] == 298
    assert out["excluded"] == {"missing_target": 1, "unseen_class": 1}
    assert out["base_metrics"] == evaluate_table(base, table, "target")["metrics"]
    assert out["other_metrics"] == evaluate_table(other, table, "target")["metrics"]


def test_versions_with_different_classes_share_one_cross_table() -> None:
    base, other = _rule_list(), _other_version(classes=3)
    table = _table(_rows(200, seed=13, classes=3))
    out = compare_on_table(base, other, table, "target")
    records = typed_records(base, table)
    pb, po = base.predict(records), other.predict(records)
    assert out["crosstab"]["labels"] == [0, 1, 2]
    assert out["crosstab"]["matrix"] == confusion_matrix(pb, po, labels=[0, 1, 2]).tolist()
    known_to_both = sum(r[3] in (0, 1) for r in _rows(200, seed=13, classes=3))  # class 2: base never saw it
    assert out["n_scored"] == known_to_both < 200
    swapped = compare_on_table(other, base, table, "target")
    assert swapped["n_scored"] == known_to_both
    assert swapped["crosstab"]["matrix"] == confusion_matrix(po, pb, labels=[0, 1, 2]).tolist()


def test_without_a_target_there_are_no_metrics_and_a_missing_one_is_an_error() -> None:
    base, other = _rule_list(), _other_version()
    table = _table(_rows(50, seed=14))
    out = compare_on_table(base, other, table, None)
    assert out["base_metrics"] is out["other_metrics"] is out["n_scored"] is None
    assert sum(map(sum, out["crosstab"]["matrix"])) == 50
    with pytest.raises(EvaluationInputError) as info:
        compare_on_table(base, other, table, "outcome")
    assert (info.value.code, info.value.field_name) == ("target_not_found", "target")


def _with_classes(rl: RuleList, classes: list[Any]) -> RuleList:
    return RuleList.from_dict({**rl.to_dict(), "classes": classes})


def _third_class(entry: dict[str, Any]) -> dict[str, Any]:
    counts = [*entry["class_counts"], 0]
    return {**entry, "class_counts": counts, "probabilities": list(smoothed_probabilities(counts, 1.0))}


def test_a_version_whose_classes_are_text_meets_the_numeric_one() -> None:
    """A reviewer retrained on a file where two target cells read `unknown`: the new version's classes were
    `"0"`, `"1"`, `"unknown"`, and the comparison with the version of classes 0, 1 said 100 % disagreement and every
    rule changed, though the two decided alike on 226 of 270 rows (evaluations already meet `"1"` with 1)."""
    base = _rule_list()
    same_as_text = _with_classes(base, ["0", "1"])
    table = _table(_rows(120, seed=15))
    out = compare_on_table(base, same_as_text, table, "target")
    assert out["n_disagree"] == 0 and out["crosstab"]["labels"] == [0, 1], out
    assert out["base_metrics"]["f1_weighted"] == out["other_metrics"]["f1_weighted"]
    rules = diff_rule_lists(base, same_as_text)["rules"]
    assert not rules["changed"] and not rules["added"] and len(rules["unchanged"]) == len(base.rules)
    doc = base.to_dict()  # a third class, as the reviewer's file had
    widened = RuleList.from_dict(
        {
            **doc,
            "classes": ["0", "1", "unknown"],
            "rules": [_third_class(r) for r in doc["rules"]],
            "default": _third_class(doc["default"]),
        }
    )
    out = compare_on_table(base, widened, table, "target")
    assert out["crosstab"]["labels"] == [0, 1, "unknown"] and out["n_disagree"] == 0, out


def test_classes_one_version_tells_apart_stay_apart() -> None:
    """A version with the classes 1 and "1" (a document may hold both): they are not merged with the other's."""
    base = _rule_list()
    both = _with_classes(_other_version(classes=3), [0, 1, "1"])
    out = compare_on_table(base, both, _table(_rows(60, seed=16)), None)
    assert out["crosstab"]["labels"] == [0, 1, "1"], out
