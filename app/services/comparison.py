"""Comparing two versions of a model (pure): a rule-level diff, and both versions on one table.

Rules are matched one to one, greedily by similarity (same prediction and same features first);
a matched pair is `unchanged` when its conditions and prediction are identical, else `changed`
with its conditions compared by feature and op. On a table: both versions' metrics on the same
rows (evaluation.py), the share of rows on which they disagree and the cross-table of predictions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from app.services.classification_metrics import metrics_block
from app.services.csvdata import Table
from app.services.evaluation import (
    Decisions,
    EvaluationInputError,
    check_scorable,
    code_labels,
    decisions,
    meeting_key,
    require_target,
    rule_ids_in_order,
    typed_records,
)
from app.services.rule_texts import condition_text, rule_text
from models.rulelist import ClassLabel, Condition, Rule, RuleList

ConditionKey = tuple[str, str, float | None, float | None, frozenset[str | None]]
LabelKey = Callable[[ClassLabel], Any]


def condition_key(c: Condition) -> ConditionKey:
    """What makes two conditions the same (category order does not matter)."""
    return (c.feature, c.op, c.low, c.high, frozenset(c.values))


def _typed(label: ClassLabel) -> Any:
    """A class label with its type: 1 and True (and 1.0) differ."""
    return type(label), label


def label_matcher(base: RuleList, other: RuleList) -> LabelKey:
    """The key on which the two versions' classes meet: as an evaluation meets a target value with a class
    (`evaluation.meeting_key`: `1`, `"1"` and `"1.0"` alike, a version trained on a target read as text has the
    classes `"0"`, `"1"`), unless that would merge two classes of one version; then value and type."""
    return meeting_key(base.classes, other.classes) or _typed


def diff_conditions(
    base: Sequence[Condition],
    other: Sequence[Condition],
    text: Callable[[Condition], str] = Condition.text,
    other_text: Callable[[Condition], str] | None = None,
) -> dict[str, Any]:
    """Condition-level diff: within each (feature, op), identical ones are dropped, the rest paired
    in order as `changed`, the leftovers `added` (other only) or `removed` (base only); `text` and
    `other_text` write a base and an other condition (default: `Condition.text`)."""
    o_text = other_text or text
    groups: dict[tuple[str, str], tuple[list[Condition], list[Condition]]] = {}
    for side, conds in enumerate((base, other)):
        for c in conds:
            groups.setdefault((c.feature, c.op), ([], []))[side].append(c)
    added: list[str] = []
    removed: list[str] = []
    changed: list[dict[str, str]] = []
    for (feature, _), (b, o) in groups.items():
        common = Counter(map(condition_key, b)) & Counter(map(condition_key, o))
        b_left, o_left = _without(b, common), _without(o, common)
        pairs = min(len(b_left), len(o_left))
        changed += [
            {"feature": feature, "base": text(x), "other": o_text(y)}
            for x, y in zip(b_left[:pairs], o_left[:pairs], strict=True)
        ]
        removed += [text(c) for c in b_left[pairs:]]
        added += [o_text(c) for c in o_left[pairs:]]
    return {"added": added, "removed": removed, "changed": changed}


def _without(conds: list[Condition], common: Counter[ConditionKey]) -> list[Condition]:
    """The conditions left once the shared ones are taken out (as many times as they are shared)."""
    budget = Counter(common)
    out = []
    for c in conds:
        k = condition_key(c)
        if budget[k] > 0:
            budget[k] -= 1
        else:
            out.append(c)
    return out


def _features(rule: Rule) -> frozenset[str]:
    return frozenset(c.feature for c in rule.conditions)


def _overlap(a: Counter[Any], b: Counter[Any]) -> float:
    """Jaccard index of two multisets (1 when both are empty)."""
    union = sum((a | b).values())
    return sum((a & b).values()) / union if union else 1.0


def similarity(
    base: RuleList, i: int, other: RuleList, j: int, key: LabelKey = _typed
) -> tuple[bool, bool, float, float, int] | None:
    """Sort key of a candidate pair (higher is more alike), None when they share no feature; predictions meet on
    `key`."""
    a, b = base.rule(i), other.rule(j)
    fa, fb = _features(a), _features(b)
    if not (fa & fb) and (fa or fb):
        return None
    same_pred = key(base.prediction_of(i)) == key(other.prediction_of(j))
    conds = _overlap(Counter(map(condition_key, a.conditions)), Counter(map(condition_key, b.conditions)))
    return (same_pred, fa == fb, conds, _overlap(Counter(fa), Counter(fb)), -abs(i - j))


def match_rules(base: RuleList, other: RuleList, key: LabelKey = _typed) -> list[tuple[int, int]]:
    """Greedy one-to-one matching of the (non-default) rules, most similar pairs first."""
    candidates = []
    for i in range(1, len(base.rules) + 1):
        for j in range(1, len(other.rules) + 1):
            alike = similarity(base, i, other, j, key)
            if alike is not None:
                candidates.append((alike, -i, -j))
    taken_b: set[int] = set()
    taken_o: set[int] = set()
    pairs = []
    for _, mi, mj in sorted(candidates, reverse=True):
        i, j = -mi, -mj
        if i not in taken_b and j not in taken_o:
            taken_b.add(i)
            taken_o.add(j)
            pairs.append((i, j))
    return sorted(pairs)


def diff_rule_lists(base: RuleList, other: RuleList) -> dict[str, Any]:
    """The `rules` and `default` blocks of a comparison in docs/governance-api.md."""
    key = label_matcher(base, other)
    pairs = match_rules(base, other, key)
    unchanged, changed = [], []
    for i, j in pairs:
        a, b = base.rule(i), other.rule(j)
        pa, pb = base.prediction_of(i), other.prediction_of(j)
        conds = diff_conditions(
            a.conditions, b.conditions, partial(condition_text, base), partial(condition_text, other)
        )
        if key(pa) == key(pb) and not any(conds.values()):
            unchanged.append({"base_rule_id": i, "other_rule_id": j, "text": rule_text(base, i)})
            continue
        changed.append(
            {
                "base_rule_id": i,
                "other_rule_id": j,
                "base_text": rule_text(base, i),
                "other_text": rule_text(other, j),
                "prediction": {"base": pa, "other": pb},
                "conditions": conds,
            }
        )
    matched_b, matched_o = {i for i, _ in pairs}, {j for _, j in pairs}
    rules = {
        "unchanged": unchanged,
        "changed": changed,
        "added": [{"other_rule_id": j, "text": rule_text(other, j)} for j in _ids(other) if j not in matched_o],
        "removed": [{"base_rule_id": i, "text": rule_text(base, i)} for i in _ids(base) if i not in matched_b],
    }
    default = {
        side: {"prediction": rl.prediction_of(0), "support": rl.default.support}
        for side, rl in (("base", base), ("other", other))
    }
    return {"rules": rules, "default": default}


def _ids(rl: RuleList) -> list[int]:
    return [j for j in rule_ids_in_order(rl) if j != 0]


# ---------------------------------------------------------------------------------------------
# both versions on one table


def union_labels(base: RuleList, other: RuleList, key: LabelKey = _typed) -> list[ClassLabel]:
    """Both versions' classes: the base's order, then the other's new ones (classes meeting on `key` are one)."""
    out = list(base.classes)
    out += [c for c in other.classes if not any(key(c) == key(d) for d in out)]
    return out


def _to_union(rl: RuleList, labels: list[ClassLabel], pred: np.ndarray, key: LabelKey) -> np.ndarray:
    """Class indices of one version mapped to positions in the union of labels."""
    where = np.asarray([next(u for u, d in enumerate(labels) if key(c) == key(d)) for c in rl.classes], dtype=np.int64)
    mapped: np.ndarray = where[pred]
    return mapped


def compare_on_table(
    base: RuleList, other: RuleList, table: Table, target: str | None, other_table: Table | None = None
) -> dict[str, Any]:
    """The `dataset` block of a comparison (without `dataset_id`): disagreement and cross-table over
    all rows; metrics side by side on the rows whose target is a class of both versions
    (`target` None: no metrics). `other_table`: the same rows as the other version reads them (default `table`)."""
    records = typed_records(base, table)
    same = other.features == base.features and (other_table is None or other_table is table)
    other_records = records if same else typed_records(other, other_table or table)
    d_base = decisions(base, base.apply(records))
    d_other = decisions(other, other.apply(other_records))
    key = label_matcher(base, other)
    labels = union_labels(base, other, key)
    pb, po = _to_union(base, labels, d_base.pred, key), _to_union(other, labels, d_other.pred, key)
    k = len(labels)
    n = table.n_rows
    n_disagree = int(np.sum(pb != po))
    out: dict[str, Any] = {
        "target": target,
        "n_rows": n,
        "disagreement": n_disagree / n if n else 0.0,
        "n_disagree": n_disagree,
        "crosstab": {"labels": labels, "matrix": np.bincount(pb * k + po, minlength=k * k).reshape(k, k).tolist()},
        "n_scored": None,
        "excluded": None,
        "base_metrics": None,
        "other_metrics": None,
    }
    if target is not None:
        require_target(other, table, target)  # a feature of either version is not the label
        out.update(_side_by_side(base, other, target, require_target(base, table, target), d_base, d_other))
    return out


def _side_by_side(
    base: RuleList, other: RuleList, target: str, cells: list[str | None], d_base: Decisions, d_other: Decisions
) -> dict[str, Any]:
    """Both metric blocks on the rows scored by both versions, and what was left out. When the target's values
    are mostly not a version's classes (what an evaluation refuses), the comparison stands without metrics and
    `metrics_withheld` says why: metrics on a few rows matched by chance would mislead."""
    coded = code_labels(base.classes, cells), code_labels(other.classes, cells)
    withheld = None
    for rl, labels in zip((base, other), coded, strict=True):
        try:
            check_scorable(rl, target, labels)
        except EvaluationInputError as e:  # (no row at all: no metrics anyway, `n_scored` 0 says so)
            if e.code == "too_few_rows_to_score":
                withheld = withheld or e.message
    yb, yo = coded[0].codes, coded[1].codes
    mask = (yb >= 0) & (yo >= 0)
    missing = int(np.sum((yb == -1) | (yo == -1)))
    blocks: dict[str, Any] = {"base_metrics": None, "other_metrics": None, "metrics_withheld": withheld}
    if mask.any() and withheld is None:
        blocks = {
            f"{side}_metrics": metrics_block(rl.classes, y[mask], d.pred[mask], d.proba[mask])
            for side, rl, y, d in (("base", base, yb, d_base), ("other", other, yo, d_other))
        }
    excluded = {"missing_target": missing, "unseen_class": int(mask.size - mask.sum()) - missing}
    return {"n_scored": int(mask.sum()), "excluded": excluded, **blocks}


__all__ = [
    "compare_on_table",
    "condition_key",
    "diff_conditions",
    "diff_rule_lists",
    "label_matcher",
    "match_rules",
    "similarity",
    "union_labels",
]
