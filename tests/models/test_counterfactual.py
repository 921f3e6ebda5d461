"""Counterfactuals read off the rule list: verified by RuleList, and minimal against brute force."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from models.counterfactual import apply_changes, counterfactual
from models.rulelist import RuleList, category_key, smoothed_probabilities
from tests.models.test_rulelist import DOC

NUMERIC = ("x", "y")
CATEGORICAL = ("c", "d")
CATEGORIES = ("a", "b", "c")
LOW, HIGH = 0.0, 10.0
FILL = 5.0


def _doc(classes: list[Any], rules: list[dict[str, Any]], default_counts: list[int]) -> dict[str, Any]:
    features = [{"name": n, "type": "numeric", "fill_value": FILL, "min": LOW, "max": HIGH} for n in NUMERIC]
    features += [{"name": n, "type": "categorical", "categories": list(CATEGORIES)} for n in CATEGORICAL]
    default = {"class_counts": default_counts, "probabilities": list(smoothed_probabilities(default_counts, 1.0))}
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "t",
        "classes": classes,
        "features": features,
        "rules": rules,
        "default": default,
        "smoothing": 1.0,
    }


# thresholds sit at half-integers and the data are integers: every region between thresholds then holds
# a grid point of step 0.5, and the closest value of each region is such a point (a bound or an integer)
thresholds = st.integers(0, 9).map(lambda k: k + 0.5)


@st.composite
def conditions(draw: st.DrawFn) -> dict[str, Any]:
    """One random condition on one of the four features."""
    feature = draw(st.sampled_from(NUMERIC + CATEGORICAL))
    if feature in NUMERIC:
        low, high = draw(st.one_of(st.none(), thresholds)), draw(st.one_of(st.none(), thresholds))
        if low is None and high is None:
            high = draw(thresholds)
        if low is not None and high is not None and low > high:
            low, high = high, low
        return {"feature": feature, "op": "between", "low": low, "high": high}
    values = draw(st.lists(st.sampled_from(CATEGORIES), min_size=1, max_size=2, unique=True))
    return {"feature": feature, "op": draw(st.sampled_from(["in", "not_in"])), "values": values}


@st.composite
def rule_lists(draw: st.DrawFn) -> RuleList:
    """A random valid rule list: 2 or 3 classes, 1 to 4 rules of 1 to 3 conditions."""
    k = draw(st.integers(2, 3))
    counts = st.lists(st.integers(0, 20), min_size=k, max_size=k)
    rules = []
    for _ in range(draw(st.integers(1, 4))):
        c = draw(counts)
        conds = draw(st.lists(conditions(), min_size=1, max_size=3))
        rules.append({"conditions": conds, "class_counts": c, "probabilities": list(smoothed_probabilities(c, 1.0))})
    return RuleList.from_dict(_doc(list(range(k)), rules, draw(counts)))


records = st.fixed_dictionaries(
    {
        **{n: st.one_of(st.none(), st.integers(0, 10)) for n in NUMERIC},
        **{n: st.sampled_from([*CATEGORIES, "unseen", None]) for n in CATEGORICAL},
    }
)


def _brute_force(rl: RuleList, record: dict[str, Any], wanted: Any, now: Any) -> tuple[int, float] | None:
    """The lexicographically smallest (changes, distance) over a grid of every region, or None."""
    grids = []
    for name in NUMERIC:
        current = FILL if record[name] is None else float(record[name])
        grids.append([current] + [v / 2 for v in range(-1, 22) if v / 2 != current])
    for name in CATEGORICAL:
        current = record[name]
        grids.append([current] + [v for v in CATEGORIES if v != category_key(current)])
    combos = list(itertools.product(*grids))
    columns = {name: np.array([combo[i] for combo in combos], dtype=object) for i, name in enumerate(NUMERIC)}
    columns.update(
        {name: np.array([combo[2 + i] for combo in combos], dtype=object) for i, name in enumerate(CATEGORICAL)}
    )
    preds = rl.predict(columns)
    best = None
    for combo, pred in zip(combos, preds.tolist(), strict=True):
        if (wanted is None and pred == now) or (wanted is not None and pred != wanted):
            continue
        changed = [i for i in range(4) if combo[i] != grids[i][0]]
        dist = sum(abs(combo[i] - grids[i][0]) / (HIGH - LOW) if i < 2 else 1.0 for i in changed)
        cost = (len(changed), dist)
        best = cost if best is None or cost < best else best
    return best


def _check(rl: RuleList, record: dict[str, Any], wanted: Any = None) -> None:
    now = rl.predict([record])[0]
    out = counterfactual(rl, record, target_class=wanted)
    expected = _brute_force(rl, record, wanted, now)
    assert out["found"] == (expected is not None), (out, expected)
    if not out["found"]:
        assert out["reason"]
        return
    changed = apply_changes(record, {c["feature"]: c["to"] for c in out["changes"]})
    assert rl.apply([changed])[0] == out["rule_id"]
    assert rl.predict([changed])[0] == out["prediction"]
    assert out["prediction"] == wanted if wanted is not None else out["prediction"] != now
    assert out["n_changes"] == len(out["changes"]) == expected[0]
    assert out["distance"] == pytest.approx(expected[1], abs=1e-9)
    assert out["exact"] is True
    probabilities = rl.rule(out["rule_id"]).probabilities
    assert out["probabilities"] == {str(c): p for c, p in zip(rl.classes, probabilities, strict=True)}


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_lists(), records)
def test_counterfactual_is_verified_and_minimal(rl: RuleList, record: dict[str, Any]) -> None:
    _check(rl, record)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule_lists(), records, st.integers(0, 2))
def test_requested_class_is_reached_minimally(rl: RuleList, record: dict[str, Any], wanted: int) -> None:
    if wanted >= len(rl.classes):
        wanted = 0
    _check(rl, record, wanted)


def test_a_dead_end_branch_does_not_hide_the_answer() -> None:
    """Breaking rule 2 on d (as cheap as on c) makes rule 1 fire: the search must try c too."""
    doc = _doc([0, 1], [], [0, 1])
    doc["rules"] = [
        {"conditions": [{"feature": "d", "op": "in", "values": ["b", "c"]}], "class_counts": [1, 0]},
        {
            "conditions": [
                {"feature": "d", "op": "in", "values": ["a"]},
                {"feature": "c", "op": "in", "values": ["a"]},
            ],
            "class_counts": [1, 0],
        },
    ]
    for rule in doc["rules"]:
        rule["probabilities"] = list(smoothed_probabilities(rule["class_counts"], 1.0))
    rl = RuleList.from_dict(doc)
    out = counterfactual(rl, {"x": None, "y": None, "c": "a", "d": "a"})
    assert out["changes"] == [{"feature": "c", "from": "a", "to": "b"}]
    assert out["rule_id"] == 0


def test_inclusive_bound_is_crossed_at_the_data_resolution() -> None:
    rl = RuleList.from_dict(DOC)
    record = {"age": 66.4, "chest pain": "asymptomatic", "smoker": None, "unused": 1.0}  # rule 1 at its upper bound
    out = counterfactual(rl, record)
    assert out["changes"] == [{"feature": "age", "from": 66.4, "to": 66.5}]
    assert out["rule_id"] == 0
    integral = {"age": 50, "chest pain": "asymptomatic", "smoker": False, "unused": 1.0}
    assert counterfactual(rl, integral)["changes"] == [{"feature": "age", "from": 50, "to": 45}]


def test_missing_numeric_value_is_replaced_from_its_fill_value() -> None:
    rl = RuleList.from_dict(DOC)
    record = {"age": None, "chest pain": "asymptomatic", "smoker": "false", "unused": 1.0}  # age -> 40: default
    out = counterfactual(rl, record)
    assert out["changes"] == [{"feature": "age", "from": None, "to": 45.5}]
    assert out["rule_id"] == 1
    assert out["distance"] == pytest.approx((45.5 - 40.0) / (90.0 - 18.0))


def test_same_class_everywhere_is_not_found() -> None:
    doc = _doc([0, 1], [], [5, 1])
    doc["rules"] = [
        {
            "conditions": [{"feature": "x", "op": "between", "low": None, "high": 3.5}],
            "class_counts": [9, 1],
            "probabilities": list(smoothed_probabilities([9, 1], 1.0)),
        }
    ]
    out = counterfactual(RuleList.from_dict(doc), {"x": 1, "y": 1, "c": "a", "d": "a"})
    assert out == {"found": False, "reason": "no rule of the list predicts a class other than 0"}


def test_rule_shadowed_by_an_earlier_rule_is_unreachable() -> None:
    always = [{"feature": "c", "op": "in", "values": list(CATEGORIES)}]  # fails only for a missing or unseen value
    doc = _doc([0, 1], [], [0, 9])
    doc["rules"] = [{"conditions": always, "class_counts": [9, 0], "probabilities": [10 / 11, 1 / 11]}]
    rl, record = RuleList.from_dict(doc), {"x": 1, "y": 1, "c": "a", "d": "a"}
    out = counterfactual(rl, record)
    assert out["found"] is False
    assert "no change" in out["reason"]
    allowed = counterfactual(rl, record, allow_missing=True)  # setting c to missing is then a change on offer
    assert allowed["changes"] == [{"feature": "c", "from": "a", "to": None}]
    assert allowed["prediction"] == 1


def test_requested_class_already_predicted_needs_no_change() -> None:
    rl = RuleList.from_dict(DOC)
    out = counterfactual(
        rl, {"age": 50, "chest pain": "asymptomatic", "smoker": False, "unused": 1.0}, target_class="high"
    )
    assert (out["found"], out["changes"], out["n_changes"], out["rule_id"]) == (True, [], 0, 1)


def test_bad_requests_raise_value_errors() -> None:
    rl = RuleList.from_dict(DOC)
    with pytest.raises(ValueError, match="not one of the model's classes"):
        counterfactual(rl, {"age": 50, "chest pain": "x", "smoker": False, "unused": 1.0}, target_class="medium")
    with pytest.raises(ValueError, match="age"):
        counterfactual(rl, {"chest pain": "x", "smoker": False, "unused": 1.0})


def test_search_budget_is_reported() -> None:
    rl = RuleList.from_dict(DOC)
    record = {"age": 50, "chest pain": "asymptomatic", "smoker": False, "unused": 1.0}
    assert counterfactual(rl, record)["exact"] is True
    out = counterfactual(rl, record, max_nodes=1)
    assert out == {"found": False, "reason": "the search budget ran out before a change was found"}
