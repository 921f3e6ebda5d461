"""Cross-fitted choice of the seeding kind (the `select` stage of fit on small data).

On small data the restart with the best training F1 is often the one that fits its training rows
best and generalises worst, and a single held-out split is a handful of rows. Cross-fitting
scores the whole procedure instead: the training rows are cut into stratified folds; on each,
every restart is trained on the other folds exactly as fit trains them, the restart with the
best training F1 within each seeding kind predicts the held-out fold, and each kind gets the
weighted F1 of its out-of-fold predictions. The usual choice (the restart with the best training
F1 on all rows) stands unless another kind's out-of-fold F1 is higher by more than two bootstrap
standard errors of the paired difference; then fit keeps that kind's training-best restart.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from models.metrics import weighted_f1

# selection_folds="auto": cross-fit with this many folds when the training rows are at most
# CROSSFIT_MAX_ROWS (small data: cheap to train, few rows to hold out)
AUTO_FOLDS = 4
CROSSFIT_MAX_ROWS = 500

# switch from the kind of the training-best restart only when the out-of-fold F1 of the best kind
# is higher by more than this many standard errors (two: a clear margin, not noise of the few rows)
SWITCH_SE = 2.0
BOOTSTRAP = 200

# (fit rows, held-out rows) -> (each restart's training F1 on the fit rows, its classes on the
# held-out rows: restarts x held-out rows)
FoldTrainer = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def auto_folds(folds: int | str, n_rows: int) -> int:
    """Number of cross-fitting folds: `folds` as given, or for "auto" AUTO_FOLDS on small data
    (at most CROSSFIT_MAX_ROWS rows) and 0 (no cross-fitting) on larger data."""
    if folds != "auto":
        return int(folds)
    return AUTO_FOLDS if n_rows <= CROSSFIT_MAX_ROWS else 0


def stratified_folds(y: np.ndarray, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """k disjoint row sets covering every row, each class dealt round-robin after a shuffle."""
    fold_of = np.empty(len(y), dtype=np.int64)
    offset = 0
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        fold_of[rows] = (offset + np.arange(len(rows))) % k
        offset += len(rows)
    return [np.flatnonzero(fold_of == f) for f in range(k)]


def best_within_kinds(kinds: tuple[str, ...], training: np.ndarray) -> dict[str, int]:
    """For each kind, its restart with the best training score (the lowest index on ties)."""
    best: dict[str, int] = {}
    for m, kind in enumerate(kinds):
        if kind not in best or training[m] > training[best[kind]]:
            best[kind] = m
    return best


def out_of_fold(
    y: np.ndarray, kinds: tuple[str, ...], folds: list[np.ndarray], train_fold: FoldTrainer
) -> dict[str, np.ndarray]:
    """Each kind's out-of-fold classes: on every fold, those of its training-best restart."""
    oof = {kind: np.empty(len(y), dtype=y.dtype) for kind in kinds}
    every = np.arange(len(y))
    for held in folds:
        training, held_classes = train_fold(np.setdiff1d(every, held), held)
        for kind, m in best_within_kinds(kinds, training).items():
            oof[kind][held] = held_classes[m]
    return oof


def paired_margin(y: np.ndarray, a: np.ndarray, b: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """(weighted F1 of predictions a minus that of b, its bootstrap standard error over the rows)."""
    boot = np.empty(BOOTSTRAP)
    for i in range(BOOTSTRAP):
        idx = rng.integers(0, len(y), len(y))
        boot[i] = weighted_f1(y[idx], a[idx]) - weighted_f1(y[idx], b[idx])
    return weighted_f1(y, a) - weighted_f1(y, b), float(boot.std())


@dataclass(frozen=True)
class KindChoice:
    """The kind kept, the kind with the best out-of-fold F1, and that kind's margin over the
    usual one (F1 difference and its bootstrap standard error; 0, 0 when they are the same)."""

    kind: str
    best: str
    margin: float
    standard_error: float


def choose_kind(y: np.ndarray, oof: dict[str, np.ndarray], usual: str, rng: np.random.Generator) -> KindChoice:
    """The kind with the best out-of-fold F1 (ties: the first) when it beats the `usual` kind's
    by more than SWITCH_SE bootstrap standard errors of the paired difference, else `usual`."""
    scores = {kind: weighted_f1(y, pred) for kind, pred in oof.items()}
    best = max(oof, key=lambda k: (scores[k], -list(oof).index(k)))
    if best == usual:
        return KindChoice(usual, best, 0.0, 0.0)
    diff, se = paired_margin(y, oof[best], oof[usual], rng)
    return KindChoice(best if diff > SWITCH_SE * se else usual, best, diff, se)
