"""Held-out rows for choosing the restart (the `select` stage of fit), numpy only."""

from __future__ import annotations

import numpy as np


def inner_split(y: np.ndarray, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(inner training rows, held-out rows), stratified by class: about `fraction` of every
    class with at least two rows is held out. fraction 0: every row trains, none is held out."""
    held: list[np.ndarray] = []
    for c in np.unique(y):
        rows = np.flatnonzero(y == c)
        take = round(fraction * len(rows)) if len(rows) >= 2 else 0
        held.append(rng.permutation(rows)[: min(take, len(rows) - 1)])
    out = np.sort(np.concatenate(held)) if held else np.zeros(0, dtype=np.int64)
    mask = np.ones(len(y), dtype=bool)
    mask[out] = False
    return np.flatnonzero(mask), out


def choose_restart(held_out: np.ndarray, training: np.ndarray) -> int:
    """The restart with the best held-out score; ties by training score, then the lowest index."""
    order = np.lexsort((np.arange(len(held_out)), -np.asarray(training), -np.asarray(held_out)))
    return int(order[0])
