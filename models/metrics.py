"""Small numpy metrics used inside the learner (no scikit-learn dependency)."""

from __future__ import annotations

import numpy as np


def weighted_f1(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Support-weighted mean of per-class F1 (scikit-learn's average='weighted')."""
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.size == 0:
        return 0.0
    labels, support = np.unique(y_true, return_counts=True)
    total = 0.0
    for lab, sup in zip(labels, support):
        tp = float(np.sum((y_true == lab) & (y_pred == lab)))
        fp = float(np.sum((y_true != lab) & (y_pred == lab)))
        fn = float(np.sum((y_true == lab) & (y_pred != lab)))
        denom = 2 * tp + fp + fn
        total += sup * (2 * tp / denom if denom > 0 else 0.0)
    return total / float(support.sum())
