"""Initial parameters of the restarts (the `initialise` stage of fit), numpy only.

Each restart is one rule list of k rules over the F encoded inputs. Kinds:
- "tree": the leaves of a best-first Gini tree with k + 1 leaves (`models.greedy_tree`): k leaves
  become the rules, the largest leaf the default rule, so the list starts as that tree;
- "tree_coarse": the same with leaves of at least 2 % of the rows (broader, steadier rules);
- "quantile": each rule a random quantile box over two inputs; consequent: the class most
  over-represented in the box (minority classes get rules where they are);
- "score": boxes over inputs drawn by their univariate split score; consequents cycle through
  the classes, most frequent first.
Every predicate that is not part of a rule's seed starts as the whole training range (the
authors' initialisation) with weight `free_weight`, so training can still add it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from models.greedy_tree import Leaf, grow_tree

SEED_WEIGHT = 0.5
KINDS = ("tree", "quantile", "score", "tree_coarse")
DETERMINISTIC = ("tree", "tree_coarse")  # their randomness (priorities, Gumbel noise) comes from DATA_SEED
DATA_SEED = 7_919


@dataclass(frozen=True)
class Restarts:
    """Initial parameters of M restarts: lower/upper/weight (M, k, F), priority (M, k), logits
    (M, k + 1, C; row k is the default rule), and the kind of each restart."""

    lower: np.ndarray
    upper: np.ndarray
    weight: np.ndarray
    priority: np.ndarray
    logits: np.ndarray
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class SeedData:
    """What every kind needs: the training matrix, labels and shared statistics."""

    Z: np.ndarray
    y: np.ndarray
    n_classes: int
    n_rules: int
    free: np.ndarray  # (F,) start weight of predicates outside a rule's seed
    feature_p: np.ndarray | None  # (F,) sampling probabilities of "score" seeds

    @property
    def prior(self) -> np.ndarray:
        """Class frequencies."""
        return np.bincount(self.y, minlength=self.n_classes) / len(self.y)


@dataclass
class _One:
    lower: np.ndarray
    upper: np.ndarray
    weight: np.ndarray
    priority: np.ndarray
    logits: np.ndarray


def restart_kinds(n_restarts: int) -> tuple[str, ...]:
    """The kinds of n restarts: the pool in order, then random kinds in turn (one restart: the
    tree). The tree kinds are deterministic, so they appear once each."""
    extra = ("quantile", "score")
    return tuple(KINDS[i] if i < len(KINDS) else extra[i % 2] for i in range(n_restarts))


def restart_rng(kind: str, index: int, rng: np.random.Generator) -> np.random.Generator:
    """The random numbers of one restart: the shared `rng` (from random_state) for random kinds;
    for the tree kinds a generator fixed by the restart's index, so that they, like the tree they
    start from, depend on the data only (the same list for every random_state when one wins)."""
    return np.random.default_rng(DATA_SEED + index) if kind in DETERMINISTIC else rng


def log_frequencies(counts: np.ndarray, smoothing: float = 1.0) -> np.ndarray:
    """Log of Laplace-smoothed class frequencies."""
    counts = np.asarray(counts, dtype=np.float64)
    return np.asarray(np.log((counts + smoothing) / (counts.sum() + smoothing * len(counts))))


def _blank(data: SeedData, rng: np.random.Generator) -> _One:
    """Every predicate the whole training range, random priorities in [1, 2), default rule at
    the class prior."""
    k = data.n_rules
    zmin, zmax = data.Z.min(axis=0), data.Z.max(axis=0)
    logits = np.zeros((k + 1, data.n_classes))
    logits[k] = np.log(data.prior + 1e-6)
    return _One(
        lower=np.tile(zmin, (k, 1)),
        upper=np.tile(zmax, (k, 1)),
        weight=np.tile(data.free, (k, 1)).astype(np.float64),
        priority=1.0 + rng.random(k),
        logits=logits,
    )


def _quantile_box(one: _One, j: int, data: SeedData, rng: np.random.Generator, p: np.ndarray | None) -> None:
    """Seed rule j on a random quantile box over two inputs drawn with probabilities p."""
    n_inputs = data.Z.shape[1]
    m = min(2, n_inputs if p is None else int(np.count_nonzero(p)))
    for f in rng.choice(n_inputs, size=m, replace=False, p=p):
        q = np.sort(rng.random(2))
        one.lower[j, f], one.upper[j, f] = np.quantile(data.Z[:, f], q)
        one.weight[j, f] = SEED_WEIGHT


def _lift_class(one: _One, j: int, data: SeedData, rows: np.ndarray) -> int:
    """The class most over-represented among the sampled rows inside rule j's box."""
    Zs, ys = data.Z[rows], data.y[rows]
    inside = np.all((Zs >= one.lower[j]) & (Zs <= one.upper[j]), axis=1)
    if not inside.any():
        return int(np.argmax(data.prior))
    freq = np.bincount(ys[inside], minlength=data.n_classes) / inside.sum()
    return int(np.argmax(freq / np.maximum(data.prior, 1e-12)))


def quantile_restart(data: SeedData, rng: np.random.Generator, by_score: bool) -> _One:
    """Random boxes; lift consequents ("quantile") or classes in turn ("score")."""
    one = _blank(data, rng)
    p = data.feature_p if by_score else None
    order = np.argsort(-data.prior, kind="stable")
    rows = rng.choice(len(data.y), size=min(len(data.y), 4096), replace=False)
    for j in range(data.n_rules):
        _quantile_box(one, j, data, rng, p)
        cls = int(order[j % data.n_classes]) if by_score else _lift_class(one, j, data, rows)
        one.logits[j, cls] = 1.0
    return one


def tree_restart(data: SeedData, rng: np.random.Generator, leaves: list[Leaf]) -> _One:
    """The leaves of a (k + 1)-leaf Gini tree as rules, its largest leaf as the default rule."""
    one = _blank(data, rng)
    default = int(np.argmax([leaf.counts.sum() for leaf in leaves]))
    rules = [leaf for i, leaf in enumerate(leaves) if i != default]
    for j, leaf in enumerate(rules):
        bounded = np.isfinite(leaf.lower) | np.isfinite(leaf.upper)
        one.lower[j] = np.where(np.isfinite(leaf.lower), leaf.lower, one.lower[j])
        one.upper[j] = np.where(np.isfinite(leaf.upper), leaf.upper, one.upper[j])
        one.weight[j, bounded] = SEED_WEIGHT
        one.logits[j] = log_frequencies(leaf.counts)
    rows = rng.choice(len(data.y), size=min(len(data.y), 4096), replace=False)
    for j in range(len(rules), data.n_rules):  # a pure or tiny data set: fewer leaves than rules
        _quantile_box(one, j, data, rng, None)
        one.logits[j, _lift_class(one, j, data, rows)] = 1.0
    one.logits[data.n_rules] = log_frequencies(leaves[default].counts)
    return one


def initial_restarts(data: SeedData, kinds: Sequence[str], rng: np.random.Generator) -> Restarts:
    """Initial parameters of one restart per kind."""
    made = []
    trees: dict[int, list[Leaf]] = {}  # min leaf size -> the tree's leaves, grown once
    for index, kind in enumerate(kinds):
        r = restart_rng(kind, index, rng)
        if kind in ("tree", "tree_coarse"):
            min_leaf = 1 if kind == "tree" else max(1, len(data.y) // 50)
            if min_leaf not in trees:
                trees[min_leaf] = grow_tree(data.Z, data.y, data.n_classes, data.n_rules + 1, min_leaf)
            made.append(tree_restart(data, r, trees[min_leaf]))
        else:
            made.append(quantile_restart(data, r, by_score=kind == "score" and data.feature_p is not None))
    return Restarts(
        lower=np.stack([o.lower for o in made]),
        upper=np.stack([o.upper for o in made]),
        weight=np.stack([o.weight for o in made]),
        priority=np.stack([o.priority for o in made]),
        logits=np.stack([o.logits for o in made]),
        kinds=tuple(kinds),
    )


def split_scores(Z: np.ndarray, y: np.ndarray, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Univariate score of each input: the best Gini gain of a one-threshold split at the
    1/8 .. 7/8 quantiles, measured on at most 4096 rows."""
    n = Z.shape[0]
    rows = rng.choice(n, size=min(n, 4096), replace=False) if n > 4096 else np.arange(n)
    Zs, onehot = Z[rows], np.eye(n_classes)[y[rows]]
    tot, s = onehot.sum(axis=0), len(rows)
    gini0 = 1.0 - np.sum((tot / s) ** 2)
    best = np.zeros(Z.shape[1])
    for t in np.quantile(Zs, np.arange(1, 8) / 8.0, axis=0):
        lc = (Zs <= t).astype(np.float64).T @ onehot  # (F, C)
        nl = lc.sum(axis=1)
        gl = 1.0 - np.sum((lc / np.maximum(nl, 1)[:, None]) ** 2, axis=1)
        gr = 1.0 - np.sum(((tot - lc) / np.maximum(s - nl, 1)[:, None]) ** 2, axis=1)
        gain = np.where((nl == 0) | (nl == s), 0.0, gini0 - (nl * gl + (s - nl) * gr) / s)
        best = np.maximum(best, gain)
    return np.maximum(best, 0.0)
