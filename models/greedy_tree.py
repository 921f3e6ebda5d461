"""A small best-first CART (Gini) in numpy, used only to seed restarts with its leaves.

Grown like scikit-learn's `DecisionTreeClassifier(max_leaf_nodes=L)`: the frontier leaf whose
split lowers the weighted Gini impurity most is split next, thresholds sit half-way between
adjacent distinct values, until L leaves or no split helps. Each leaf is returned as a box
`lower < z <= upper` over the encoded inputs with its class counts, i.e. a rule.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Leaf:
    """One leaf: the rows with lower < z <= upper (per input; +-inf where unbounded)."""

    lower: np.ndarray
    upper: np.ndarray
    counts: np.ndarray


@dataclass(frozen=True)
class _Split:
    gain: float
    feature: int
    threshold: float


@dataclass
class _Node:
    rows: np.ndarray  # bool mask over the training rows
    lower: np.ndarray
    upper: np.ndarray
    split: _Split | None


def _gini(counts: np.ndarray) -> np.ndarray:
    """Gini impurity of class-count vectors (last axis), 0 for empty ones."""
    n = counts.sum(axis=-1)
    share = counts / np.maximum(n, 1)[..., None]
    return np.asarray(1.0 - np.sum(share**2, axis=-1))


def _dense_split(
    Z: np.ndarray, onehot: np.ndarray, order: np.ndarray, rows: np.ndarray, min_leaf: int
) -> tuple[float, int, float]:
    """(weighted child impurity * n_node, column, threshold) of the best split over the columns
    of Z (sorted once: `order`); impurity inf when none is valid."""
    n_node = int(rows.sum())
    n_feat = Z.shape[1]
    if n_feat == 0:
        return np.inf, 0, 0.0
    keep = rows[order]  # (n, F): each column keeps exactly n_node entries
    node_order = order.T[keep.T].reshape(n_feat, n_node)
    vals = Z[node_order, np.arange(n_feat)[:, None]]  # (F, n_node) ascending
    left = np.cumsum(onehot[node_order], axis=1)[:, :-1]  # (F, n_node-1, C)
    total = onehot[rows].sum(axis=0)
    n_left = np.arange(1, n_node)[None, :]
    impurity = n_left * _gini(left) + (n_node - n_left) * _gini(total - left)
    valid = (vals[:, 1:] > vals[:, :-1]) & (n_left >= min_leaf) & (n_node - n_left >= min_leaf)
    impurity = np.where(valid, impurity, np.inf)
    f, i = np.unravel_index(int(np.argmin(impurity)), impurity.shape)
    return float(impurity[f, i]), int(f), float((vals[f, i] + vals[f, i + 1]) / 2.0)


def _two_valued_split(
    low_side: np.ndarray, thresholds: np.ndarray, onehot: np.ndarray, rows: np.ndarray, min_leaf: int
) -> tuple[float, int, float]:
    """Like `_dense_split` for columns with two values (one candidate each: a matrix product)."""
    if low_side.shape[1] == 0:
        return np.inf, 0, 0.0
    masked = onehot * rows[:, None]  # the node's rows (exact: sums of 0/1 counts)
    left = low_side.T @ masked  # (F2, C)
    total = masked.sum(axis=0)
    n_node = float(total.sum())
    n_left = left.sum(axis=1)
    impurity = n_left * _gini(left) + (n_node - n_left) * _gini(total - left)
    impurity = np.where((n_left >= min_leaf) & (n_node - n_left >= min_leaf), impurity, np.inf)
    f = int(np.argmin(impurity))
    return float(impurity[f]), f, float(thresholds[f])


@dataclass(frozen=True)
class _Columns:
    """The training matrix split into many-valued and two-valued columns, prepared once."""

    onehot: np.ndarray  # (n, C) float
    dense: np.ndarray  # column indices
    dense_Z: np.ndarray
    dense_order: np.ndarray
    two: np.ndarray
    two_low: np.ndarray  # (n, F2) float: 1 where the row has the column's lower value
    two_thr: np.ndarray


def _prepare(Z: np.ndarray, y: np.ndarray, n_classes: int) -> _Columns:
    lo, hi = Z.min(axis=0), Z.max(axis=0)
    is_two = np.all((lo == Z) | (hi == Z), axis=0) & (hi > lo)
    dense = np.flatnonzero(~is_two & (hi > lo))
    two = np.flatnonzero(is_two)
    dense_Z = Z[:, dense]
    return _Columns(
        onehot=np.eye(n_classes)[y],
        dense=dense,
        dense_Z=dense_Z,
        dense_order=np.argsort(dense_Z, axis=0, kind="stable"),
        two=two,
        two_low=(Z[:, two] == lo[two]).astype(np.float64),
        two_thr=(lo[two] + hi[two]) / 2.0,
    )


def best_split(cols: _Columns, rows: np.ndarray, min_leaf: int) -> _Split | None:
    """Best Gini split of the rows `rows` (a mask), or None when no split lowers the impurity."""
    n_node = int(rows.sum())
    if n_node < 2 * min_leaf:
        return None
    imp_d, f_d, thr_d = _dense_split(cols.dense_Z, cols.onehot, cols.dense_order, rows, min_leaf)
    imp_t, f_t, thr_t = _two_valued_split(cols.two_low, cols.two_thr, cols.onehot, rows, min_leaf)
    if not (np.isfinite(imp_d) or np.isfinite(imp_t)):
        return None
    if imp_d <= imp_t:
        impurity, feature, threshold = imp_d, int(cols.dense[f_d]), thr_d
    else:
        impurity, feature, threshold = imp_t, int(cols.two[f_t]), thr_t
    gain = (n_node * float(_gini(cols.onehot[rows].sum(axis=0))) - impurity) / cols.onehot.shape[0]
    return _Split(gain, feature, threshold) if gain > 1e-12 else None


def grow_tree(Z: np.ndarray, y: np.ndarray, n_classes: int, max_leaves: int, min_leaf: int = 1) -> list[Leaf]:
    """Best-first Gini tree with at most max_leaves leaves; returns its leaves."""
    Z = np.asarray(Z, dtype=np.float64)
    cols = _prepare(Z, y, n_classes)
    n_feat = Z.shape[1]

    def node(rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> _Node:
        return _Node(rows, lower, upper, best_split(cols, rows, min_leaf))

    leaves = [node(np.ones(len(y), dtype=bool), np.full(n_feat, -np.inf), np.full(n_feat, np.inf))]
    while len(leaves) < max_leaves:
        gains = [lf.split.gain if lf.split is not None else -1.0 for lf in leaves]
        best = int(np.argmax(gains))
        split = leaves[best].split
        if split is None:
            break
        parent = leaves.pop(best)
        go_left = Z[:, split.feature] <= split.threshold
        up = parent.upper.copy()
        up[split.feature] = min(up[split.feature], split.threshold)
        low = parent.lower.copy()
        low[split.feature] = max(low[split.feature], split.threshold)
        leaves.insert(best, node(parent.rows & ~go_left, low, parent.upper))
        leaves.insert(best, node(parent.rows & go_left, parent.lower, up))
    return [Leaf(lf.lower, lf.upper, np.bincount(y[lf.rows], minlength=n_classes)) for lf in leaves]
