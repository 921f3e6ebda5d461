"""Classification metrics on class indices (pure, numpy only), matching scikit-learn's definitions:
accuracy, F1 (weighted, macro, per class), precision, recall, ROC AUC, Brier score, confusion
matrix and reliability bins. Inputs: true and predicted class indices and probability rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from models.rulelist import ClassLabel

N_CALIBRATION_BINS = 10


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0 (scikit-learn's zero_division=0)."""
    out = np.zeros(num.shape, dtype=np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def confusion(y: np.ndarray, pred: np.ndarray, k: int) -> np.ndarray:
    """k x k counts, rows = true class, columns = predicted class."""
    return np.bincount(y * k + pred, minlength=k * k).reshape(k, k)


def roc_auc(score: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve (ties count one half); None when only one class is present."""
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    values, inverse = np.unique(score, return_inverse=True)
    pos = np.bincount(inverse, weights=positive, minlength=values.size)
    neg = np.bincount(inverse, minlength=values.size) - pos
    below = np.cumsum(neg) - neg
    return float(np.sum(pos * (below + 0.5 * neg)) / (n_pos * n_neg))


def metrics_block(classes: Sequence[ClassLabel], y: np.ndarray, pred: np.ndarray, proba: np.ndarray) -> dict[str, Any]:
    """Accuracy, weighted and macro F1, per-class precision/recall/F1/support; ROC AUC and Brier
    score (of `classes[1]`) for binary targets. Undefined ratios are 0, as scikit-learn's."""
    k = len(classes)
    cm = confusion(y, pred, k)
    tp, support, predicted = np.diag(cm), cm.sum(axis=1), cm.sum(axis=0)
    precision, recall = _ratio(tp, predicted), _ratio(tp, support)
    f1 = _ratio(2 * tp, support + predicted)
    present = (support + predicted) > 0
    n = int(y.size)
    out: dict[str, Any] = {
        "accuracy": float(tp.sum() / n) if n else None,
        "f1_weighted": float(np.sum(f1 * support) / n) if n else None,
        "f1_macro": float(f1[present].mean()) if present.any() else None,
        "per_class": [
            {"class": c, "precision": float(p), "recall": float(r), "f1": float(f), "support": int(s)}
            for c, p, r, f, s in zip(classes, precision, recall, f1, support, strict=True)
        ],
        "roc_auc": None,
        "brier": None,
    }
    if k == 2 and n:
        positive = (y == 1).astype(np.float64)
        out["roc_auc"] = roc_auc(proba[:, 1], positive)
        out["brier"] = float(np.mean((proba[:, 1] - positive) ** 2))
    return out


def calibration(classes: Sequence[ClassLabel], y: np.ndarray, pred: np.ndarray, proba: np.ndarray) -> dict[str, Any]:
    """Reliability bins (deciles, empty ones left out): binary, P(classes[1]) against its observed
    rate; multi-class, the top-class probability against accuracy."""
    if len(classes) == 2:
        p, hit, positive = proba[:, 1], (y == 1), classes[1]
    else:
        p, hit, positive = proba.max(axis=1), (pred == y), None
    b = np.minimum((p * N_CALIBRATION_BINS).astype(np.int64), N_CALIBRATION_BINS - 1)
    count = np.bincount(b, minlength=N_CALIBRATION_BINS)
    sum_p = np.bincount(b, weights=p, minlength=N_CALIBRATION_BINS)
    sum_hit = np.bincount(b, weights=hit.astype(np.float64), minlength=N_CALIBRATION_BINS)
    bins = [
        {
            "lower": i / N_CALIBRATION_BINS,
            "upper": (i + 1) / N_CALIBRATION_BINS,
            "mean_predicted": float(sum_p[i] / count[i]),
            "observed_rate": float(sum_hit[i] / count[i]),
            "count": int(count[i]),
        }
        for i in range(N_CALIBRATION_BINS)
        if count[i]
    ]
    return {"positive_class": positive, "bins": bins}


__all__ = ["N_CALIBRATION_BINS", "calibration", "confusion", "metrics_block", "roc_auc"]
