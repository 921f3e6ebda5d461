"""The one weighted F1 of the learner (scikit-learn's average='weighted'), numpy only."""

from __future__ import annotations

from typing import Any

import numpy as np


def weighted_f1(y_true: Any, y_pred: Any) -> float:
    """Support-weighted mean over the true classes of each class's F1 score."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    if y_true.size == 0:
        return 0.0
    labels, codes = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    t, p = codes[: y_true.size], codes[y_true.size :]
    k = len(labels)
    conf = np.bincount(t * k + p, minlength=k * k).reshape(k, k)
    tp = np.diag(conf).astype(np.float64)
    support = conf.sum(axis=1)
    denom = support + conf.sum(axis=0)
    f1 = np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    return float(np.sum(f1 * support) / support.sum())
