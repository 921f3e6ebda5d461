"""The paper's synthetic rule-list generator (appendix "Synthetic Data Generation"); numpy only."""

from __future__ import annotations

import numpy as np
import pandas as pd

from models.rulelist import Condition, Feature, RuleList


def make_rule_list_data(
    d: int = 20,
    n: int = 5000,
    s: float = 0.1,
    k: int = 2,
    m: int = 2,
    random_state: int | None = None,
) -> tuple[pd.DataFrame, np.ndarray, RuleList]:
    """Sample X ~ U(0,1)^d and labels from a random planted rule list.

    Each of the k rules is a conjunction of m intervals of width s**(1/m) on distinct random
    features (so it covers about a fraction s of the rows), has a random class in {0, 1} and a
    random priority; a row takes the class of the highest-priority rule that holds, and a fair
    coin flip when none does. Returns (X with columns x0..x{d-1}, y, the planted `RuleList` with
    its rules in priority order and class counts measured on the returned rows).
    """
    if not (1 <= m <= d):
        raise ValueError("need 1 <= m <= d")
    if not 0 < s <= 1:
        raise ValueError("need 0 < s <= 1")
    rng = np.random.default_rng(random_state)
    X = rng.random((n, d))
    width = s ** (1.0 / m)
    rules: list[list[tuple[int, float, float]]] = []
    for _ in range(k):
        feats = rng.choice(d, size=m, replace=False)
        lows = rng.uniform(0.0, 1.0 - width, size=m)
        rules.append([(int(f), float(lo), float(lo + width)) for f, lo in zip(feats, lows, strict=True)])
    labels = rng.integers(0, 2, size=k)
    priority = rng.permutation(k) + 1  # distinct priorities 1..k; the highest decides
    order = [int(j) for j in np.argsort(-priority, kind="stable")]
    y = _label(X, rules, order, labels, rng)
    names = [f"x{i}" for i in range(d)]
    frame = pd.DataFrame(X, columns=names)
    features = [Feature(name=nm, type="numeric", fill_value=0.5, min=0.0, max=1.0) for nm in names]
    conditions = [
        [Condition(feature=names[f], op="between", low=lo, high=hi) for f, lo, hi in sorted(rules[j])] for j in order
    ]
    meta = {"generator": "neurules-appendix", "d": d, "n": n, "s": s, "k": k, "m": m, "seed": random_state}
    planted = RuleList.build(
        classes=[0, 1], features=features, rules=conditions, X=frame, y=y.tolist(), smoothing=1.0, metadata=meta
    )
    return frame, y.astype(np.int64), planted


def _label(
    X: np.ndarray,
    rules: list[list[tuple[int, float, float]]],
    order: list[int],
    labels: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Labels under the planted list (first rule in `order` that holds), a coin flip elsewhere."""
    y: np.ndarray = np.asarray(rng.integers(0, 2, size=X.shape[0]))  # uncovered rows: a fair coin
    open_ = np.ones(X.shape[0], dtype=bool)
    for j in order:
        holds = np.ones(X.shape[0], dtype=bool)
        for f, lo, hi in rules[j]:
            holds &= (X[:, f] > lo) & (X[:, f] < hi)
        cap = holds & open_
        y[cap] = labels[j]
        open_ &= ~cap
    return y
