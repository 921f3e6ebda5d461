"""Scoring a rule list on a labelled file: every metric against scikit-learn's, counts that add up."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import (
    accuracy_score,
    brier_score_loss,
    confusion_matrix,
    f1_score,
    precision_recall_fscore_support,
    roc_auc_score,
)

from app.services.csvdata import parse_csv, write_csv
from app.services.evaluation import (
    MAX_SLICE_GROUPS,
    OTHER_GROUP,
    EvaluationInputError,
    code_labels,
    evaluate_split,
    evaluate_table,
    label_key,
    typed_records,
)
from models.rulelist import Condition, Feature, RuleList

FEATURES = (
    Feature("age", "numeric", fill_value=54.0, min=29.0, max=77.0),
    Feature("chol", "numeric", fill_value=240.0, min=126.0, max=564.0),
    Feature("thal", "categorical", categories=("normal", "fixed", "reversable")),
)
RULES = (
    (Condition("age", "between", low=55.5), Condition("thal", "in", values=("reversable",))),
    (Condition("chol", "between", high=210.5),),
    (Condition("thal", "not_in", values=("normal",)), Condition("age", "between", low=40.5, high=60.5)),
)


def _rows(n: int, seed: int, classes: int = 2) -> list[list[Any]]:
    """Random records with a noisy label that the rules above partly capture."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        age, chol = int(rng.integers(29, 78)), int(rng.integers(126, 400))
        thal = str(rng.choice(["normal", "fixed", "reversable"]))
        signal = (age > 55 and thal == "reversable") or chol < 200
        label = int(signal) if rng.random() < 0.8 else int(rng.integers(0, classes))
        if classes == 3 and thal == "fixed" and rng.random() < 0.6:
            label = 2
        rows.append([age, chol, thal, label, str(rng.choice(["f", "m"]))])
    return rows


def _rule_list(classes: int = 2) -> RuleList:
    rows = _rows(300, seed=1, classes=classes)
    X = {f.name: np.array([r[i] for r in rows], dtype=object) for i, f in enumerate(FEATURES)}
    return RuleList.build(
        classes=list(range(classes)), features=FEATURES, rules=RULES, X=X, y=[r[3] for r in rows], target="target"
    )


def _table(rows: list[list[Any]], header: tuple[str, ...] = ("age", "chol", "thal", "target", "sex")) -> Any:
    return parse_csv(write_csv(list(header), rows).encode())


def _reference(rl: RuleList, table: Any, target: str = "target") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labels, predictions and probabilities of the scored rows, straight from RuleList."""
    records = typed_records(rl, table)
    labels = code_labels(rl.classes, table.columns[target])
    mask = labels.codes >= 0
    kept = [r for r, m in zip(records, mask, strict=True) if m]
    y = np.array(rl.classes)[labels.codes[mask]]
    return y, rl.predict(kept), rl.predict_proba(kept)


def _check_metrics(
    metrics: dict[str, Any], classes: list[Any], y: np.ndarray, pred: np.ndarray, proba: np.ndarray
) -> None:
    assert metrics["accuracy"] == pytest.approx(accuracy_score(y, pred))
    assert metrics["f1_weighted"] == pytest.approx(f1_score(y, pred, average="weighted", zero_division=0))
    assert metrics["f1_macro"] == pytest.approx(f1_score(y, pred, average="macro", zero_division=0))
    p, r, f, s = precision_recall_fscore_support(y, pred, labels=classes, zero_division=0)
    for i, entry in enumerate(metrics["per_class"]):
        assert entry["class"] == classes[i]
        assert (entry["precision"], entry["recall"], entry["f1"]) == pytest.approx((p[i], r[i], f[i]))
        assert entry["support"] == s[i]
    if len(classes) == 2:
        if len(set(y.tolist())) == 2:
            assert metrics["roc_auc"] == pytest.approx(roc_auc_score(y == classes[1], proba[:, 1]))
        else:
            assert metrics["roc_auc"] is None
        assert metrics["brier"] == pytest.approx(brier_score_loss(y == classes[1], proba[:, 1]))
    else:
        assert metrics["roc_auc"] is None and metrics["brier"] is None


def test_binary_metrics_match_scikit_learn_and_counts_add_up() -> None:
    rl = _rule_list()
    rows = _rows(400, seed=2)
    rows[0][3], rows[1][3], rows[2][3] = None, "7", "7"  # a missing target, an unseen class (twice)
    rows[3][3], rows[4][3] = "1.0", "0.0"  # numeric text of the classes
    rows[5][2], rows[6][2] = "other", "other"  # an unseen category, still scored
    rows[0][2] = "ghost"  # an unseen category on an excluded row: not counted
    out = evaluate_table(rl, _table(rows), "target")
    assert out["n_rows_in_file"] == 400
    assert out["excluded"] == {"missing_target": 1, "unseen_class": 2, "unseen_class_values": {"7": 2}}
    assert out["n_rows"] == 397
    assert out["unseen_categories"] == {"thal": {"other": 2}}
    y, pred, proba = _reference(rl, _table(rows))
    assert len(y) == 397
    _check_metrics(out["metrics"], [0, 1], y, pred, proba)
    cm = out["confusion_matrix"]
    assert cm["labels"] == [0, 1]
    assert cm["matrix"] == confusion_matrix(y, pred, labels=[0, 1]).tolist()
    assert sum(map(sum, cm["matrix"])) == out["n_rows"] == sum(r["n"] for r in out["rules"])
    assert [r["rule_id"] for r in out["rules"]] == [1, 2, 3, 0]
    ids = rl.apply(typed_records(rl, _table(rows)))[[i for i in range(400) if i not in (0, 1, 2)]]
    for r in out["rules"]:
        rows_of_rule = ids == r["rule_id"]
        assert r["n"] == int(rows_of_rule.sum())
        assert sum(r["class_counts"].values()) == r["n"]
        assert r["share"] == pytest.approx(r["n"] / 397)
        if r["n"]:
            assert r["accuracy"] == pytest.approx(float(np.mean(y[rows_of_rule] == pred[rows_of_rule])))
        assert r["training_support"] == rl.rule(r["rule_id"]).support
    assert sum(r["training_share"] for r in out["rules"]) == pytest.approx(1.0)


def test_calibration_matches_scikit_learn() -> None:
    rl = _rule_list()
    table = _table(_rows(500, seed=3))
    out = evaluate_table(rl, table, "target")
    y, _, proba = _reference(rl, table)
    p = proba[:, 1]
    assert not np.isin(np.round(p * 10, 9), np.arange(11)).any()  # no probability on a bin edge
    true, predicted = calibration_curve(y == 1, p, n_bins=10, strategy="uniform")
    bins = out["calibration"]["bins"]
    assert out["calibration"]["positive_class"] == 1
    assert [b["observed_rate"] for b in bins] == pytest.approx(true.tolist())
    assert [b["mean_predicted"] for b in bins] == pytest.approx(predicted.tolist())
    assert sum(b["count"] for b in bins) == out["n_rows"]
    for b in bins:
        assert b["lower"] <= b["mean_predicted"] < b["upper"]


def test_multiclass_metrics_and_top_class_calibration() -> None:
    rl = _rule_list(classes=3)
    table = _table(_rows(400, seed=4, classes=3))
    out = evaluate_table(rl, table, "target")
    y, pred, proba = _reference(rl, table)
    _check_metrics(out["metrics"], [0, 1, 2], y, pred, proba)
    assert out["calibration"]["positive_class"] is None
    top = proba.max(axis=1)
    for b in out["calibration"]["bins"]:
        rows = (top >= b["lower"]) & (top < b["upper"])
        assert b["count"] == int(rows.sum())
        assert b["observed_rate"] == pytest.approx(float(np.mean(y[rows] == pred[rows])))


def test_slices_hold_the_same_metrics_per_group() -> None:
    rl = _rule_list()
    rows = _rows(300, seed=5)
    rows[0][4] = None
    rows[1][3] = None  # excluded rows are in no group
    out = evaluate_table(rl, _table(rows), "target", slice_by="sex")
    groups = out["slices"]["groups"]
    assert out["slices"]["column"] == "sex"
    assert {g["value"] for g in groups} == {"f", "m", None}
    assert sum(g["n_rows"] for g in groups) == out["n_rows"] == 299
    y, pred, proba = _reference(rl, _table(rows))
    sex = np.array([r[4] for i, r in enumerate(rows) if i != 1], dtype=object)
    for g in groups:
        rows_of_group = sex == g["value"] if g["value"] is not None else np.array([v is None for v in sex])
        assert g["n_rows"] == int(rows_of_group.sum())
        _check_metrics(g["metrics"], [0, 1], y[rows_of_group], pred[rows_of_group], proba[rows_of_group])
        assert g["positive_rate"] == pytest.approx(float(np.mean(pred[rows_of_group] == 1)))


def test_slices_keep_the_largest_groups_and_pool_the_rest() -> None:
    rl = _rule_list()
    rows = _rows(200, seed=6)
    for i, r in enumerate(rows):
        r[4] = "big" if i < 100 else f"id{i}"  # 1 large group and 100 singletons
    out = evaluate_table(rl, _table(rows), "target", slice_by="sex")
    groups = out["slices"]["groups"]
    assert len(groups) == MAX_SLICE_GROUPS
    assert groups[0]["value"] == "big" and groups[0]["n_rows"] == 100
    assert groups[-1]["value"] == OTHER_GROUP and groups[-1]["n_rows"] == 200 - 100 - 48
    assert [g["pooled"] for g in groups] == [False] * 49 + [True]
    assert sum(g["n_rows"] for g in groups) == 200


def test_a_value_reading_other_keeps_its_own_group_beside_the_pooled_one() -> None:
    rl = _rule_list()
    rows = _rows(200, seed=6)
    for i, r in enumerate(rows):
        r[4] = OTHER_GROUP if i < 100 else f"id{i}"  # a real value "(other)" and 100 singletons
    out = evaluate_table(rl, _table(rows), "target", slice_by="sex")
    groups = out["slices"]["groups"]
    assert (groups[0]["value"], groups[0]["pooled"], groups[0]["n_rows"]) == (OTHER_GROUP, False, 100)
    assert (groups[-1]["value"], groups[-1]["pooled"], groups[-1]["n_rows"]) == (OTHER_GROUP, True, 52)
    assert sum(g["n_rows"] for g in groups) == 200


def test_single_class_rows_have_no_auc() -> None:
    rl = _rule_list()
    rows = [r for r in _rows(200, seed=7) if r[3] == 1]
    out = evaluate_table(rl, _table(rows), "target")
    assert out["metrics"]["roc_auc"] is None
    assert out["metrics"]["brier"] is not None


def test_target_labels_meet_the_documents_classes() -> None:
    assert [label_key(v) for v in ("1.0", "1", 1, 1.0, "True", True, "FALSE", " yes ", "", None)] == [
        "1",
        "1",
        "1",
        "1",
        "true",
        "true",
        "false",
        "yes",
        None,
        None,
    ]
    coded = code_labels([False, True], ["true", "False", "1", None, "maybe"])
    assert coded.codes.tolist() == [1, 0, -2, -1, -2]
    assert coded.unseen_values == {"1": 1, "maybe": 1}
    assert code_labels([0, 1], np.array([1.0, np.nan, 0.0, np.nan, 2.0])).codes.tolist() == [1, -1, 0, -1, -2]
    strict = code_labels(["1", "1.0"], ["1.0", "1", "01"])  # loose keys would merge the classes: exact keys
    assert strict.codes.tolist() == [1, 0, -2]


def test_bad_files_raise_errors_naming_the_field() -> None:
    rl = _rule_list()
    rows = _rows(20, seed=8)

    def error(table: Any, target: str = "target", slice_by: str | None = None) -> EvaluationInputError:
        with pytest.raises(EvaluationInputError) as info:
            evaluate_table(rl, table, target, slice_by=slice_by)
        return info.value

    e = error(_table(rows), target="outcome")
    assert (e.code, e.field_name) == ("target_not_found", "target")
    e = error(_table([r[1:] for r in rows], header=("chol", "thal", "target", "sex")))
    assert (e.code, e.field_name) == ("missing_columns", "dataset_id")
    assert "age" in e.message and e.details == [{"field": "dataset_id", "message": "missing column 'age'"}]
    e = error(_table(rows), slice_by="region")
    assert (e.code, e.field_name) == ("column_not_found", "slice_by")
    e = error(_table([[*r[:3], "9", r[4]] for r in rows]))
    assert e.code == "no_rows_to_score" and "20 unseen" in e.message
    bad = [list(r) for r in rows]
    bad[3][0] = "old"
    e = error(_table(bad))
    assert e.code == "invalid_values" and e.details[0]["field"] == "line 5.age"


def test_a_feature_or_a_column_of_other_values_as_target_raises_naming_target() -> None:
    """The worker's path (`evaluate_table`) refuses what the request refuses: a model input as the target
    (its few values that read as a class were scored: metrics about nothing), and a target column whose
    values are mostly not the model's classes; a minority of unseen classes is still scored and counted."""
    rl = _rule_list()
    rows = _rows(20, seed=9)
    with pytest.raises(EvaluationInputError) as info:
        evaluate_table(rl, _table(rows), "age")
    assert (info.value.code, info.value.field_name) == ("target_is_a_feature", "target")
    mostly_other = [[*r[:3], r[3] if i < 3 else str(100 + i), r[4]] for i, r in enumerate(rows)]
    with pytest.raises(EvaluationInputError) as info:
        evaluate_table(rl, _table(mostly_other), "target")
    e = info.value
    assert (e.code, e.field_name) == ("too_few_rows_to_score", "target") and "only 3 of the 20 rows" in e.message
    few_other = [[*r[:3], r[3] if i >= 3 else "7", r[4]] for i, r in enumerate(rows)]
    assert evaluate_table(rl, _table(few_other), "target")["excluded"]["unseen_class"] == 3


def test_split_entry_scores_typed_columns_like_the_file_entry() -> None:
    rl = _rule_list()
    rows = _rows(150, seed=9)
    X = {
        "age": np.array([r[0] for r in rows], dtype=np.float64),
        "chol": np.array([r[1] for r in rows], dtype=np.float64),
        "thal": np.array([r[2] for r in rows], dtype=object),
    }
    split = evaluate_split(rl, X, np.array([r[3] for r in rows], dtype=np.int64))
    whole = evaluate_table(rl, _table(rows), "target")
    for key in ("n_rows", "excluded", "metrics", "confusion_matrix", "calibration", "rules"):
        assert split[key] == whole[key], key
    import pandas as pd  # the worker holds its held-out split as a DataFrame and a label array

    assert evaluate_split(rl, pd.DataFrame(X), np.array([r[3] for r in rows]))["rules"] == whole["rules"]


def test_a_semicolon_file_keeps_a_categorical_level_with_a_comma() -> None:
    """An evaluation reads `1,5` in a categorical column as that level (it was read as `1.5`, which no rule
    names), and the numeric column's decimal commas as numbers."""
    from app.services.evaluations import score_file
    from app.services.training_overlap import NO_TRAINING_FILE, NoTrainingFile
    from tests.conftest import rule_list_doc

    doc = rule_list_doc()
    doc["features"][2]["categories"] = ["1,5", "2,5", None]
    doc["rules"][0]["conditions"][1]["values"] = ["1,5"]
    rl = RuleList.from_dict(doc)
    data = b"age;income;smoker;risk\n70,5;50,5;1,5;high\n70,5;5,5;2,5;low\n30;50,5;2,5;high\n"
    out = score_file(rl, data, "risk", None, NoTrainingFile(None, NO_TRAINING_FILE))
    assert [r["n"] for r in out["rules"]] == [1, 1, 1]  # rules 1, 2 and the default each decide one row


def test_a_level_spelled_in_another_unicode_form_is_scored_as_the_level_not_unseen() -> None:
    """A decomposed `Zürich` (NFD) against the composed level was counted unseen and decided by another rule."""
    import unicodedata

    from tests.app.governance_helpers import ZURICH as composed
    from tests.app.governance_helpers import city_rule_list

    rl = RuleList.from_dict(city_rule_list())
    rows = [[composed, 1], [unicodedata.normalize("NFD", composed), 1], ["Bern", 0], ["Genf", 0]]
    out = evaluate_table(rl, _table(rows, ("city", "target")), "target")
    assert out["unseen_categories"] == {"city": {"Genf": 1}}
    assert {r["rule_id"]: r["n"] for r in out["rules"]} == {1: 2, 0: 2}
    assert out["metrics"]["accuracy"] == 1.0
