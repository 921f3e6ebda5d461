"""Scoring a rule list on labelled data (pure, numpy only): metrics, confusion matrix, calibration,
per-rule statistics, unseen categories and per-group slices, in the shapes of docs/governance-api.md.

Feature columns are typed by `serving.table_records`, the code predict.csv uses, and decided by
`RuleList.apply`; target cells are matched to the document's classes by `label_key`. Rows whose
target is missing or a class the model never saw are counted in `excluded`, never dropped silently.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.services.classification_metrics import calibration, confusion, metrics_block
from app.services.csvdata import Table, to_float
from app.services.errors import Invalid
from app.services.rule_texts import rule_text
from app.services.serving import RecordError, ServedModel, class_key, table_records
from models.rulelist import CategoryKey, ClassLabel, RuleList, category_key

MISSING, UNSEEN = -1, -2  # label codes of rows that are not scored
MAX_SLICE_GROUPS = 50  # the 49 largest groups and "(other)"
OTHER_GROUP = "(other)"
MAX_LISTED_VALUES = 50  # values listed per feature in `unseen_categories` and in `unseen_class_values`
MIN_SCORED_SHARE = 0.5  # of the rows with a target: fewer of the model's classes, and the column is not its label

Progress = Callable[[float], None]


class EvaluationInputError(Invalid, ValueError):
    """Data that cannot be scored (422 at the edge): a stable `code`, and `field` naming the request
    field at fault (`field_name`: `target`, `slice_by` or `dataset_id`)."""

    def __init__(self, code: str, message: str, *, field: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message, code=code, details=details or [{"field": field, "message": message}])
        self.field_name = field


# ---------------------------------------------------------------------------------------------
# target labels


def label_key(value: Any) -> CategoryKey:
    """Key on which a target value meets a class label: the category key, with numeric text read
    as a number ("1.0" -> "1") and "True"/"FALSE" as booleans ("true"/"false"); None when missing."""
    key = category_key(value)
    if key is None or not isinstance(value, str):
        return key
    text = key.strip()
    if text.lower() in ("true", "false"):
        return text.lower()
    number = to_float(text)
    return category_key(number) if number is not None else (text or None)


@dataclass(frozen=True)
class CodedLabels:
    """Target values as class indices of the document (MISSING / UNSEEN for rows not scored)."""

    codes: np.ndarray
    unseen_values: dict[str, int]

    @property
    def scored(self) -> np.ndarray:
        """Mask of the rows that are scored."""
        mask: np.ndarray = self.codes >= 0
        return mask

    def excluded(self) -> dict[str, Any]:
        """The `excluded` block: missing targets and classes the model never saw."""
        return {
            "missing_target": int(np.sum(self.codes == MISSING)),
            "unseen_class": int(np.sum(self.codes == UNSEEN)),
            "unseen_class_values": self.unseen_values,
        }


def meeting_key(*class_lists: Sequence[ClassLabel]) -> Callable[[Any], CategoryKey] | None:
    """The key on which values meet classes: the loose `label_key` unless it would merge two classes of one of
    the lists, else `category_key` unless that would; None when both would."""
    for key in (label_key, category_key):
        if all(len({key(c) for c in classes}) == len(classes) for classes in class_lists):
            return key
    return None


def _class_keys(classes: Sequence[ClassLabel]) -> tuple[Callable[[Any], CategoryKey], dict[CategoryKey, int]]:
    """The key function (`meeting_key`) and class index."""
    key = meeting_key(classes)
    if key is None:
        raise ValueError("the document's classes are not distinct as category keys")
    return key, {key(c): i for i, c in enumerate(classes)}


def code_labels(classes: Sequence[ClassLabel], values: Sequence[Any] | np.ndarray) -> CodedLabels:
    """Match target values to the document's classes (each distinct value is keyed once)."""
    key, index = _class_keys(classes)
    items = list(values)  # the same objects in both passes: a NaN then finds itself in `lookup`
    lookup: dict[Any, int] = {}
    for v in dict.fromkeys(items):
        k = key(v)
        lookup[v] = MISSING if k is None else index.get(k, UNSEEN)
    codes = np.fromiter((lookup[v] for v in items), dtype=np.int64, count=len(items))
    unseen = Counter(str(items[i]) for i in np.flatnonzero(codes == UNSEEN).tolist())
    return CodedLabels(codes, dict(unseen.most_common(MAX_LISTED_VALUES)))


# ---------------------------------------------------------------------------------------------
# decisions per rule


@dataclass(frozen=True)
class Decisions:
    """Per-row decisions of a rule list: deciding rule id, predicted class index, probabilities."""

    ids: np.ndarray
    pred: np.ndarray
    proba: np.ndarray


def rule_ids_in_order(rule_list: RuleList) -> list[int]:
    """Rule ids in list order, then the default rule (0)."""
    return [*range(1, len(rule_list.rules) + 1), 0]


def class_index(rule_list: RuleList, label: ClassLabel) -> int:
    """Position of a class label in `classes` (type-exact: 1 and True are different labels)."""
    return next(i for i, c in enumerate(rule_list.classes) if type(c) is type(label) and c == label)


def decisions(rule_list: RuleList, ids: np.ndarray) -> Decisions:
    """Predicted class index and probabilities per row from the deciding rule ids."""
    n_ids = len(rule_list.rules) + 1
    table = np.asarray([rule_list.rule(j).probabilities for j in range(n_ids)], dtype=np.float64)
    pred_of = np.asarray([class_index(rule_list, rule_list.prediction_of(j)) for j in range(n_ids)], dtype=np.int64)
    return Decisions(ids, pred_of[ids], table[ids])


def rule_stats(rule_list: RuleList, ids: np.ndarray, y: np.ndarray) -> list[dict[str, Any]]:
    """One entry per rule (list order, then the default): rows decided, share, accuracy, class
    counts, and the training support and share from the document."""
    k, n_ids = len(rule_list.classes), len(rule_list.rules) + 1
    counts = np.bincount(ids * k + y, minlength=n_ids * k).reshape(n_ids, k)
    n_rows = int(ids.size)
    train_total = sum(rule_list.rule(j).support for j in range(n_ids))
    keys = [class_key(c) for c in rule_list.classes]
    out = []
    for j in rule_ids_in_order(rule_list):
        rule, n = rule_list.rule(j), int(counts[j].sum())
        pred = rule_list.prediction_of(j)
        out.append(
            {
                "rule_id": j,
                "rule_text": rule_text(rule_list, j),
                "prediction": pred,
                "n": n,
                "share": n / n_rows if n_rows else 0.0,
                "accuracy": float(counts[j, class_index(rule_list, pred)] / n) if n else None,
                "class_counts": dict(zip(keys, (int(c) for c in counts[j]), strict=True)),
                "training_support": rule.support,
                "training_share": rule.support / train_total if train_total else None,
            }
        )
    return out


def score(rule_list: RuleList, ids: np.ndarray, labels: CodedLabels) -> dict[str, Any]:
    """Everything an evaluation reports that needs no file: counts, metrics, confusion matrix,
    calibration and per-rule statistics, on the rows whose target is a known class."""
    mask = labels.scored
    y = labels.codes[mask]
    d = decisions(rule_list, ids[mask])
    classes = list(rule_list.classes)
    return {
        "n_rows": int(y.size),
        "excluded": labels.excluded(),
        "classes": classes,
        "metrics": metrics_block(classes, y, d.pred, d.proba),
        "confusion_matrix": {"labels": classes, "matrix": confusion(y, d.pred, len(classes)).tolist()},
        "calibration": calibration(classes, y, d.pred, d.proba),
        "rules": rule_stats(rule_list, d.ids, y),
    }


def evaluate_split(rule_list: RuleList, X: Any, y: Sequence[Any] | np.ndarray) -> dict[str, Any]:
    """Score on columns already typed (the worker's held-out split: a DataFrame or a mapping of
    columns, and the labels); the `score` block, so each version can carry per-rule accuracy."""
    return score(rule_list, rule_list.apply(X), code_labels(rule_list.classes, y))


# ---------------------------------------------------------------------------------------------
# a parsed CSV


def served(rule_list: RuleList) -> ServedModel:
    """The serving view of a rule list (what `table_records` types the columns for)."""
    return ServedModel.build("", "", "", 0, rule_list.to_dict())


def typed_records(rule_list: RuleList, table: Table) -> list[dict[str, Any]]:
    """Feature columns typed as predict.csv types them (extra columns ignored); a missing model
    column or a bad cell is an EvaluationInputError."""
    try:
        return table_records(served(rule_list), table, ignore_extra=True)
    except RecordError as e:
        missing = [d["field"].removeprefix("header.") for d in e.details if d["field"].startswith("header.")]
        if missing:
            raise EvaluationInputError(
                "missing_columns",
                f"the file lacks the model's column(s): {', '.join(missing)}",
                field="dataset_id",
                details=[{"field": "dataset_id", "message": f"missing column {name!r}"} for name in missing],
            ) from None
        raise EvaluationInputError("invalid_values", e.message, field="dataset_id", details=e.details) from None


def require_column(table: Table, name: str, field: str) -> list[str | None]:
    """A column's cells; EvaluationInputError naming the request field when the file lacks it."""
    if name not in table.columns:
        code = "target_not_found" if field == "target" else "column_not_found"
        raise EvaluationInputError(code, f"the file has no column {name!r}", field=field)
    return table.columns[name]


def require_target(rule_list: RuleList, table: Table, target: str) -> list[str | None]:
    """The target column's cells; EvaluationInputError naming `target` when the file lacks it or it is one
    of the model's input features (a feature is never the label: scoring it matched a few values to the
    classes by chance and answered metrics about nothing)."""
    if target in {f.name for f in rule_list.features}:
        raise EvaluationInputError(
            "target_is_a_feature",
            f"{target!r} is one of the model's input features, not a label column; name the column that holds "
            f"the label (the model predicts {rule_list.target!r}: {list(rule_list.classes)})",
            field="target",
        )
    return require_column(table, target, "target")


def check_scorable(rule_list: RuleList, target: str, labels: CodedLabels) -> None:
    """Refuse a target column whose values are mostly not the model's classes (none at all, or fewer than
    half of the rows that have a value): its metrics would describe a handful of rows matched by chance."""
    excluded = labels.excluded()
    classes = list(rule_list.classes)
    n_scored = int(labels.scored.sum())
    if n_scored == 0:
        raise EvaluationInputError(
            "no_rows_to_score",
            f"no row has a target that is one of the model's classes {classes} "
            f"({excluded['missing_target']} missing, {excluded['unseen_class']} unseen)",
            field="target",
        )
    unseen = excluded["unseen_class"]
    if n_scored < MIN_SCORED_SHARE * (n_scored + unseen):
        examples = ", ".join(repr(v) for v in list(excluded["unseen_class_values"])[:5])
        raise EvaluationInputError(
            "too_few_rows_to_score",
            f"only {n_scored} of the {n_scored + unseen} rows with a target hold one of the model's classes "
            f"{classes}; the other {unseen} hold values the model never predicts (e.g. {examples}). Is {target!r} "
            f"the label column? At least half of the rows with a target must hold one of the classes",
            field="target",
        )


def _counts_on_rows(cells: list[str | None], excluded: np.ndarray) -> Counter[str | None]:
    """Value counts over all rows but the excluded ones (few, usually)."""
    counts = Counter(cells)
    counts.subtract(cells[i] for i in excluded)
    return counts


def unseen_categories(rule_list: RuleList, table: Table, excluded: np.ndarray) -> dict[str, dict[str, int]]:
    """Per categorical feature, the values of scored rows that training never saw (missing aside)."""
    out = {}
    for f in rule_list.features:
        if f.type != "categorical":
            continue
        seen = set(f.categories)
        counts = _counts_on_rows(table.columns[f.name], excluded)
        unseen = Counter(
            {v: c for v, c in counts.items() if c > 0 and v is not None and f.level_key(category_key(v)) not in seen}
        )
        if unseen:
            out[f.name] = {str(v): c for v, c in unseen.most_common(MAX_LISTED_VALUES)}
    return out


def slice_groups(cells: list[str | None]) -> tuple[np.ndarray, list[str | None], bool]:
    """Group index per cell, the group values (largest first) and whether the last group pools the rest: beyond
    50 values, the 49 largest keep their own group and the rest share the last, shown as "(other)". Groups are
    told apart by position, so a real value "(other)" keeps its own group."""
    counts = Counter(cells)
    ordered = sorted(counts, key=lambda v: (-counts[v], v is not None, v or ""))
    pooled = len(ordered) > MAX_SLICE_GROUPS
    kept = ordered[: MAX_SLICE_GROUPS - 1] if pooled else ordered
    index = {v: i for i, v in enumerate(kept)}
    rest = len(kept)
    codes = np.fromiter((index.get(v, rest) for v in cells), dtype=np.int64, count=len(cells))
    return codes, [*kept, OTHER_GROUP] if pooled else kept, pooled


def slices(rule_list: RuleList, column: str, cells: list[str | None], y: np.ndarray, d: Decisions) -> dict[str, Any]:
    """The same metrics per group of the slice column (scored rows only), with the positive rate."""
    classes = list(rule_list.classes)
    codes, values, pooled = slice_groups(cells)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(values) + 1))
    groups = []
    for g, value in enumerate(values):
        rows = order[bounds[g] : bounds[g + 1]]
        pred = d.pred[rows]
        groups.append(
            {
                "value": value,
                "pooled": pooled and g == len(values) - 1,
                "n_rows": int(rows.size),
                "metrics": metrics_block(classes, y[rows], pred, d.proba[rows]),
                "positive_rate": float(np.mean(pred == 1)) if len(classes) == 2 else None,
            }
        )
    return {"column": column, "groups": groups}


def evaluate_table(
    rule_list: RuleList,
    table: Table,
    target: str,
    *,
    slice_by: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score a rule list on a parsed CSV: the body of an evaluation in docs/governance-api.md."""
    report = progress or (lambda _: None)
    target_cells = require_target(rule_list, table, target)
    slice_cells = require_column(table, slice_by, "slice_by") if slice_by is not None else None
    records = typed_records(rule_list, table)
    report(0.4)
    labels = code_labels(rule_list.classes, target_cells)
    check_scorable(rule_list, target, labels)
    ids = rule_list.apply(records)
    report(0.8)
    out = {"n_rows_in_file": table.n_rows, **score(rule_list, ids, labels)}
    excluded = np.flatnonzero(~labels.scored)
    out["unseen_categories"] = unseen_categories(rule_list, table, excluded)
    out["slices"] = None
    if slice_by is not None and slice_cells is not None:
        mask = labels.scored
        kept = [c for c, m in zip(slice_cells, mask.tolist(), strict=True) if m]
        out["slices"] = slices(rule_list, slice_by, kept, labels.codes[mask], decisions(rule_list, ids[mask]))
    report(1.0)
    return out


__all__ = [
    "CodedLabels",
    "Decisions",
    "EvaluationInputError",
    "check_scorable",
    "code_labels",
    "decisions",
    "evaluate_split",
    "evaluate_table",
    "label_key",
    "meeting_key",
    "require_target",
    "rule_stats",
    "score",
    "typed_records",
]
