"""Training a rule list from stored CSV bytes (pure: no database, no Celery).

The CSV is parsed with the same strict parser the API used to validate it, so types and missing
tokens agree on both sides. torch is imported only inside `train_rule_list` (via models).
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from typing import Any

import numpy as np

from app.services.csvdata import EXACT_INTEGER_LIMIT, parse_csv, profile, to_float
from app.services.evaluation import evaluate_split
from models.rulelist import RuleList


class TrainingInputError(ValueError):
    """The dataset/parameters cannot be trained on; the message is shown to the user."""


@dataclass(frozen=True)
class PreparedData:
    """Feature columns (numeric: float arrays with NaN; categorical: object arrays) and labels."""

    columns: dict[str, np.ndarray]
    feature_types: dict[str, str]
    y: np.ndarray
    n_dropped: int


@dataclass(frozen=True)
class TrainOutcome:
    """What a finished training run produced."""

    document: dict[str, Any]
    metrics: dict[str, Any]
    parameters: dict[str, Any]
    seed: int
    device: str
    seconds: float


def _label(cell: str, numeric_integral: bool) -> int | str:
    return int(float(cell)) if numeric_integral else cell


def prepare(data: bytes, target: str, features: list[str] | None) -> PreparedData:
    """Parse the CSV and split it into typed feature columns and target labels (rows without a target dropped)."""
    table = parse_csv(data)
    profiles = {p.name: p for p in profile(table)}
    if target not in profiles:
        raise TrainingInputError(f"target column {target!r} is not in the dataset")
    names = features if features is not None else [h for h in table.header if h != target]
    unknown = [n for n in names if n not in profiles]
    if unknown:
        raise TrainingInputError(f"unknown feature column(s): {', '.join(unknown)}")
    tcells = table.columns[target]
    keep = np.array([c is not None for c in tcells], dtype=bool)
    tp = profiles[target]
    # integer labels only where every one is exact as a float (|v| < 2**53): beyond, int(float(cell)) merged
    # distinct labels (9007199254740992 and ...993 became one class) or overflowed int64; those stay text
    integral = tp.type == "numeric" and all(
        (v := to_float(c)) is not None and float(v).is_integer() and abs(v) < EXACT_INTEGER_LIMIT
        for c in tcells
        if c is not None
    )
    y = np.array([_label(c, integral) for c in tcells if c is not None], dtype=np.int64 if integral else object)
    cols: dict[str, np.ndarray] = {}
    types: dict[str, str] = {}
    for n in names:
        cells = [c for c, k in zip(table.columns[n], keep, strict=True) if k]
        if profiles[n].type == "numeric":
            cols[n] = np.array([math.nan if c is None else float(c) for c in cells], dtype=np.float64)
        else:
            arr = np.empty(len(cells), dtype=object)
            arr[:] = cells
            cols[n] = arr
        types[n] = profiles[n].type
    return PreparedData(cols, types, y, int((~keep).sum()))


def stratified_split(y: np.ndarray, test_size: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-class shuffled split; classes with one row stay in training."""
    rng = np.random.default_rng(seed)
    train, test = [], []
    labels = list(dict.fromkeys(y.tolist()))
    for lab in labels:
        idx = np.flatnonzero(y == lab)
        rng.shuffle(idx)
        n_test = round(len(idx) * test_size) if len(idx) >= 2 else 0
        n_test = min(max(n_test, 1 if len(idx) >= 2 else 0), len(idx) - 1)
        test.append(idx[:n_test])
        train.append(idx[n_test:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def scores(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, Any]:
    """Accuracy, weighted and macro F1 (numpy only)."""
    y_true = np.asarray(y_true, dtype=object)
    y_pred = np.asarray(y_pred, dtype=object)
    n = len(y_true)
    if n == 0:
        return {"n_rows": 0, "accuracy": None, "weighted_f1": None, "macro_f1": None}
    ts, ps = y_true.astype(str), y_pred.astype(str)
    # the macro average over the classes in the labels or the predictions, as the evaluation's f1_macro (and
    # scikit-learn) take it: a class predicted but absent from these rows counts with F1 0
    labels = np.union1d(np.unique(ts), np.unique(ps))
    support = np.array([np.sum(ts == lab) for lab in labels])
    f1s = []
    for lab in labels:
        tp = float(np.sum((ts == lab) & (ps == lab)))
        fp = float(np.sum((ts != lab) & (ps == lab)))
        fn = float(np.sum((ts == lab) & (ps != lab)))
        d = 2 * tp + fp + fn
        f1s.append(2 * tp / d if d else 0.0)
    f1 = np.asarray(f1s)
    return {
        "n_rows": n,
        "accuracy": round(float(np.mean(ts == ps)), 6),
        "weighted_f1": round(float(np.sum(f1 * support) / support.sum()), 6),
        "macro_f1": round(float(np.mean(f1)), 6),
    }


def package_versions() -> dict[str, str]:
    """Versions of the packages that shaped the model."""
    out = {"python": platform.python_version()}
    for pkg in ("neurules", "numpy", "pandas", "torch"):
        try:
            out[pkg] = importlib_metadata.version(pkg)
        except importlib_metadata.PackageNotFoundError:
            out[pkg] = "absent"
    return out


Estimator = Callable[..., Any]


def default_estimator(**kwargs: Any) -> Any:
    """The real learner (imports torch)."""
    from models.estimator import NeuRulesClassifier

    return NeuRulesClassifier(**kwargs)


def _estimator_kwargs(parameters: dict[str, Any], seed: int) -> dict[str, Any]:
    """The estimator's arguments: rules, seed, device, epochs, and the further options (which must not repeat them)."""
    kwargs: dict[str, Any] = {"n_rules": int(parameters.get("n_rules", 10)), "random_state": seed, "device": "auto"}
    if parameters.get("epochs") is not None:
        kwargs["epochs"] = parameters["epochs"]
    options = dict(parameters.get("options") or {})
    reserved = set(kwargs) & set(options)
    if reserved:
        raise TrainingInputError(f"options must not repeat {', '.join(sorted(reserved))}; use the top-level parameter")
    return {**kwargs, **options}


def _metrics(
    doc: dict[str, Any], rl: Any, split: tuple[Any, Any, Any, Any], parameters: dict[str, Any], n_dropped: int
) -> dict[str, Any]:
    """Held-out and training scores of the crisp list, and its held-out evaluation (None without held-out rows)."""
    X_tr, X_te, y_tr, y_te = split
    held_out = len(y_te) > 0
    return {
        "holdout": scores(y_te, rl.predict(X_te)) if held_out else scores(y_te, y_te),
        "train": scores(y_tr, rl.predict(X_tr)),
        "test_size": parameters.get("test_size", 0.2),
        "n_rules": len(doc["rules"]),
        "rows_without_target_dropped": n_dropped,
        # per-rule held-out accuracy and the evaluation blocks, read off the same split (null: no held-out rows)
        "holdout_evaluation": evaluate_split(RuleList.from_dict(doc), X_te, y_te) if held_out else None,
    }


def train_rule_list(
    data: bytes,
    target: str,
    parameters: dict[str, Any],
    callback: Callable[[dict[str, Any]], Any] | None = None,
    estimator: Estimator = default_estimator,
) -> TrainOutcome:
    """Fit NeuRules on the dataset, extract the crisp rule list, measure it on a held-out split."""
    import pandas as pd

    t0 = time.perf_counter()
    prep = prepare(data, target, parameters.get("features"))
    seed = int(parameters.get("random_state", 0))
    if len(np.unique(prep.y.astype(str))) < 2:
        raise TrainingInputError(f"target {target!r} has a single class")
    tr, te = stratified_split(prep.y, float(parameters.get("test_size", 0.2)), seed)
    kwargs = _estimator_kwargs(parameters, seed)
    try:
        clf = estimator(**kwargs)
    except TypeError as e:
        raise TrainingInputError(f"invalid training option: {e}") from None
    frame = pd.DataFrame(prep.columns)
    X_tr, X_te = frame.iloc[tr].reset_index(drop=True), frame.iloc[te].reset_index(drop=True)
    y_tr, y_te = prep.y[tr], prep.y[te]
    try:
        clf.fit(X_tr, y_tr, callback=callback, eval_set=(X_te, y_te) if len(te) else None)
    except ValueError as e:
        if type(e).__name__ == "TrainingCancelled":
            raise
        raise TrainingInputError(f"the learner rejected the parameters or the data: {e}") from None
    rl = clf.rule_list_
    doc = rl.to_dict()
    doc["target"] = target
    meta = dict(doc.get("metadata") or {})
    metrics = _metrics(doc, rl, (X_tr, X_te, y_tr, y_te), parameters, prep.n_dropped)
    params = clf.get_params() if hasattr(clf, "get_params") else kwargs
    params = {k: (list(v) if isinstance(v, tuple) else v) for k, v in params.items()}
    meta.update({"seed": seed, "metrics": {"holdout": metrics["holdout"]}})
    doc["metadata"] = meta
    device = str(meta.get("device", "cpu"))
    seconds = round(time.perf_counter() - t0, 3)
    return TrainOutcome(document=doc, metrics=metrics, parameters=params, seed=seed, device=device, seconds=seconds)
