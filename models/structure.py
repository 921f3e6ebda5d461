"""Projections of a trained network between and after training stages (numpy + torch).

Each one is part of training, applied to the network itself and measured by the benchmark:
- `snap_bounds_`: every bound moves to the shortest decimal (in original units) inside the gap
  between the two training values it lies between (in the last snap, in a column whose training
  values have at most d decimals, a threshold with at most d decimals moves half a unit of the d-th
  decimal outward, so no row written with d decimals lies on it), or to +-inf beyond
  the training range: no training row changes side; vacuous predicates (both bounds infinite) are
  switched off;
- `prune_predicates_`: predicates whose failure alone cannot block their rule at zero
  temperature are switched off; of the rest, a predicate is dropped when dropping it changes the
  zero-temperature route of no training row, and while a rule has more than `max_conditions`
  conditions, the one whose removal re-routes the fewest training rows; kept weights are raised
  to MIN_WEIGHT so that the network is exactly a rule list at zero temperature;
- `drop_unused_rules_`: rules that decide no training row are switched off (routes unchanged);
- `train_consequents_` trains the consequent logits alone by gradient on the fixed zero-temperature
  routes (cross-entropy + the smoothing prior; convex), and `fit_consequents_` sets them to that
  objective's exact minimiser, log((count + s) / (n_rule + s * C)).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from models.encoding import TabularEncoder
from models.network import DEFAULT_PRIORITY, SoftRuleList, first_match_order
from models.relaxations import ordered_bounds


@dataclass(frozen=True)
class UnitGrid:
    """The distinct training values of one network input: in original units (`values`, one-hot
    inputs 0/1) and as the float32 network input (`z`), ascending; with the standardisation."""

    feature: int
    values: np.ndarray
    z: np.ndarray
    mean: float
    scale: float
    decimals: int | None = None  # every training value has at most this many decimals: bounds avoid that grid
    fill_value: float = float("nan")  # what a missing value becomes: no bound is moved onto it


MAX_DECIMALS = 6  # columns written with more decimals than this are treated as continuous
# the last snap moves a threshold off the column's decimal grid only when that stays short: a threshold written
# with all the column's decimals (20 among whole numbers -> 19.5, 12.37 among hundredths -> 12.375), not a shorter
# one (0.7 among millionths stayed 0.7000005, 107.5 among hundredths 107.505, 4000 among tenths 4000.05: a value
# written like the training ones meets it only by chance), nor one of more than OFF_GRID_MAX_DIGITS digits
OFF_GRID_MAX_DIGITS = 12  # 120000.5 still moves; 16900000000000.5 (15 digits) does not


def _on_decimal_grid(values: np.ndarray, d: int) -> bool:
    """Whether every value (an array, or one as a 0-d array) is written exactly with d decimals (up to binary
    rounding)."""
    scaled = values.astype(np.float64) * 10.0**d
    return bool(np.all(np.abs(scaled - np.round(scaled)) <= 8 * np.spacing(np.abs(scaled))))


def value_decimals(values: np.ndarray) -> int | None:
    """The fewest decimals (0..MAX_DECIMALS) that write every value, None when none do (or no values)."""
    if not len(values):
        return None
    return next((d for d in range(MAX_DECIMALS + 1) if _on_decimal_grid(values, d)), None)


def unit_grids(encoder: TabularEncoder, raw: list[np.ndarray], Z: np.ndarray) -> list[UnitGrid]:
    """One grid per network input from the training rows (raw columns and their encoding Z)."""
    grids = []
    for u, unit in enumerate(encoder.units):
        if unit.kind == "numeric":
            spec = encoder.columns[unit.feature]
            values = np.unique(raw[unit.feature])
            z = spec.standardised(values).astype(np.float32)
            # the fill value (the median, 20.5 between 20 and 21) stands for missing rows, not for a value seen
            seen = values[np.isfinite(values) & (values != spec.fill_value)]
            grids.append(
                UnitGrid(unit.feature, values, z, spec.mean, spec.scale, value_decimals(seen), spec.fill_value)
            )
        else:
            z = np.unique(Z[:, u]).astype(np.float32)
            grids.append(UnitGrid(unit.feature, z.astype(np.float64), z, 0.0, 1.0))
    return grids


def nice_between(lo: float, hi: float) -> float:
    """A short decimal strictly between lo < hi (the midpoint when none is shorter)."""
    mid = lo + (hi - lo) / 2.0
    for digits in range(1, 18):
        t = float(f"{mid:.{digits}g}")
        if lo < t < hi:
            return t
    return mid


def _image(grid: UnitGrid, threshold: float, i: int) -> float:
    """The network bound of `threshold`, strictly inside the gap (z[i-1], z[i])."""
    z = np.float32((threshold - grid.mean) / grid.scale)
    if grid.z[i - 1] < z < grid.z[i]:
        return float(z)
    mid = np.float32((float(grid.z[i - 1]) + float(grid.z[i])) / 2.0)  # float32 too coarse for the threshold
    return float(mid) if grid.z[i - 1] < mid < grid.z[i] else float(grid.z[i])


def snap_lower(grid: UnitGrid, a: float, off_grid: bool = False) -> tuple[float, float | None]:
    """(network bound, threshold in original units) for lower bound a; rows with z >= a are in.
    Threshold None: unbounded (-inf); +inf: no training row is in. `off_grid`: see `_gap_threshold`."""
    i = int(np.searchsorted(grid.z, np.float32(a), side="left"))
    if i == 0:
        return -np.inf, None
    if i == len(grid.z):
        return np.inf, np.inf
    t = _gap_threshold(grid, i, -0.5 if off_grid else 0.0)
    return _image(grid, t, i), t


def snap_upper(grid: UnitGrid, b: float, off_grid: bool = False) -> tuple[float, float | None]:
    """(network bound, threshold in original units) for upper bound b; rows with z <= b are in.
    Threshold None: unbounded (+inf); -inf: no training row is in. `off_grid`: see `_gap_threshold`."""
    i = int(np.searchsorted(grid.z, np.float32(b), side="right"))
    if i == len(grid.z):
        return np.inf, None
    if i == 0:
        return -np.inf, -np.inf
    t = _gap_threshold(grid, i, 0.5 if off_grid else 0.0)
    return _image(grid, t, i), t


def _gap_threshold(grid: UnitGrid, i: int, shift: float) -> float:
    """The short decimal in the gap (grid.values[i - 1], grid.values[i]); with `shift` (the last snap), one
    written with no more decimals than the column's training values (`grid.decimals`, d) moved half a unit
    of the d-th decimal outward (20 -> 19.5 for a lower bound, 20.5 for an upper one in a whole-number
    column; 12.37 -> 12.375 for an upper one in a column of two decimals): rows written like the training
    values are decided as at the short threshold, and none (an unseen 20, or 12.37) lies exactly on the
    bound, where the network's predicate is 1/2 and could disagree with the list. Done in the last snap
    only, so training up to it is unchanged; never out of the gap (grid.values[i - 1], grid.values[i]),
    never onto the fill value (a missing row, filled with a median such as 20.5, would then lie on it), and
    only where it stays short (a threshold with all of the column's d decimals, OFF_GRID_MAX_DIGITS). Where it is
    not moved, a row lying
    exactly on the threshold is still decided as the list says (`<=` / `>=` hold there); only the network's
    predicate, 1/2 on its bound, may differ for it, and the benchmark counts such rows as ties."""
    t = nice_between(float(grid.values[i - 1]), float(grid.values[i]))
    d = grid.decimals
    if not shift or d is None or value_decimals(np.asarray([t])) != d:
        return t
    moved = round(t + shift * 10.0**-d, d + 1)
    inside = grid.values[i - 1] < moved < grid.values[i] and moved != grid.fill_value
    short = float(f"{moved:.{OFF_GRID_MAX_DIGITS}g}") == moved
    return moved if inside and short else t


def snap_bounds_(net: SoftRuleList, grids: list[UnitGrid], off_grid: bool = False) -> None:
    """Snap every weighted bound into its gap between training values; drop vacuous predicates
    (`off_grid`: thresholds on a column's decimal grid moved half a unit of its last decimal outward)."""
    with torch.no_grad():
        lo_t, hi_t = ordered_bounds(net.lower, net.upper)
        lo, hi = lo_t.cpu().numpy().astype(np.float64), hi_t.cpu().numpy().astype(np.float64)
        live = (torch.relu(net.weight) * net.pred_mask).cpu().numpy() > 0
        for m, j, f in zip(*np.nonzero(live), strict=True):
            lo[m, j, f] = snap_lower(grids[f], lo[m, j, f], off_grid)[0]
            hi[m, j, f] = snap_upper(grids[f], hi[m, j, f], off_grid)[0]
        vacuous = np.isneginf(lo) & np.isposinf(hi)
        dev = net.lower.device
        net.lower.copy_(torch.tensor(lo, dtype=torch.float32, device=dev))
        net.upper.copy_(torch.tensor(hi, dtype=torch.float32, device=dev))
        net.pred_mask.mul_(torch.tensor(~vacuous, dtype=torch.float32, device=dev))
        net.weight.mul_(net.pred_mask)


def strong_predicates(weight: np.ndarray, priority: np.ndarray, eps: float) -> np.ndarray:
    """(k, F): predicates whose failure alone keeps their rule below the default rule at zero
    temperature (weight w of W in all: conjunction W / (W - w + w (W + eps) / eps))."""
    w = np.maximum(weight, 0.0)
    total = w.sum(axis=-1, keepdims=True)
    act = total / np.maximum(total - w + w * (total + eps) / eps, 1e-30)
    return np.asarray((w > 0) & (act * priority[:, None] < DEFAULT_PRIORITY))


@dataclass
class _ListState:
    """One restart as a strict rule list over the training rows."""

    Z: np.ndarray
    lower: np.ndarray  # (k, F) ordered bounds
    upper: np.ndarray
    weight: np.ndarray
    keep: np.ndarray  # (k, F) bool: the conditions
    order: list[int]
    unit_feature: np.ndarray
    _fires: dict[int, np.ndarray] = field(default_factory=dict)

    def inside(self, j: int, units: np.ndarray) -> np.ndarray:
        """(n, len(units)): which rows satisfy rule j's predicates on `units`."""
        zs = self.Z[:, units]
        return np.asarray((zs >= self.lower[j, units]) & (zs <= self.upper[j, units]))

    def fires(self, j: int) -> np.ndarray:
        """Rows where all of rule j's conditions hold (cached until they change)."""
        if j not in self._fires:
            self._fires[j] = np.asarray(self.inside(j, np.flatnonzero(self.keep[j])).all(axis=1))
        return self._fires[j]

    def drop(self, j: int, feature: int) -> None:
        """Remove rule j's conditions on one feature."""
        self.keep[j] &= self.unit_feature != feature
        self._fires.pop(j, None)

    def winner_rank(self) -> np.ndarray:
        """Per row: position in `order` of the first rule that fires (len(order): default)."""
        rank = np.full(self.Z.shape[0], len(self.order))
        for r, j in reversed(list(enumerate(self.order))):
            rank[self.fires(j)] = r
        return rank


def _feature_importance(state: _ListState, j: int, rank_j: int, winner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(features of rule j's conditions, training rows that dropping each would route to j)."""
    units = np.flatnonzero(state.keep[j])
    feats = np.unique(state.unit_feature[units])
    fails = ~state.inside(j, units)
    by_feat = np.stack([fails[:, state.unit_feature[units] == g].any(axis=1) for g in feats], axis=1)
    alone = (by_feat.sum(axis=1) == 1) & (winner > rank_j)
    return feats, (by_feat & alone[:, None]).sum(axis=0)


def _prune_rule(state: _ListState, j: int, rank_j: int, max_conditions: int) -> None:
    """Drop rule j's conditions that route nothing, then the weakest while over max_conditions."""
    winner = state.winner_rank()
    while state.keep[j].any():
        feats, moved = _feature_importance(state, j, rank_j, winner)
        weights = np.array([state.weight[j, state.unit_feature == g].sum() for g in feats])
        if not ((moved == 0).any() or len(feats) > max_conditions):
            return
        drop = feats[np.lexsort((weights, moved))[0]]  # re-routes the fewest rows, then the lightest
        state.drop(j, int(drop))
        if moved.min() > 0:
            winner = state.winner_rank()  # dropping re-routed rows


def prune_predicates_(
    net: SoftRuleList, Z: np.ndarray, unit_feature: np.ndarray, max_conditions: int, eps: float
) -> None:
    """Prune every restart's predicates (see the module docstring) and project the network."""
    with torch.no_grad():
        lower_t, upper_t = ordered_bounds(net.lower, net.upper)
        lower, upper = lower_t.cpu().numpy(), upper_t.cpu().numpy()
        weight = (torch.relu(net.weight) * net.pred_mask).cpu().numpy()
        priority = net.priority.cpu().numpy()
        alive = net.rule_mask.cpu().numpy() > 0
    keep = np.zeros(weight.shape, dtype=bool)
    for m in range(net.n_models):
        strong = strong_predicates(weight[m], priority[m], eps)
        order = first_match_order(priority[m], alive[m])
        state = _ListState(Z, lower[m], upper[m], weight[m], strong, order, unit_feature)
        for rank_j, j in enumerate(order):
            _prune_rule(state, j, rank_j, max_conditions)
        keep[m] = state.keep
    with torch.no_grad():
        net.pred_mask.copy_(torch.tensor(keep, dtype=torch.float32, device=net.pred_mask.device))
    net.project_()


def route_counts(net: SoftRuleList, sel: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(M, k + 1, C): training rows per zero-temperature route (sel: rule index per restart and
    row, k = default) and class."""
    k1, n_classes = net.n_rules + 1, net.n_classes
    flat = sel * n_classes + y[None, :]
    counts = torch.zeros(net.n_models, k1 * n_classes, device=sel.device)
    counts.scatter_add_(1, flat, torch.ones_like(flat, dtype=counts.dtype))
    return counts.reshape(net.n_models, k1, n_classes)


def drop_unused_rules_(net: SoftRuleList, sel: torch.Tensor, y: torch.Tensor) -> None:
    """Switch off rules that decide no training row (their routes: sel)."""
    used = route_counts(net, sel, y)[:, :-1].sum(dim=-1) > 0
    with torch.no_grad():
        net.rule_mask.mul_(used.to(net.rule_mask.dtype))


def train_consequents_(net: SoftRuleList, sel: torch.Tensor, y: torch.Tensor, smoothing: float) -> None:
    """Gradient training of the consequent logits alone, with the zero-temperature routes fixed:
    full-batch cross-entropy plus the smoothing prior (a symmetric Dirichlet), by L-BFGS with a
    line search, which converges on this smooth convex problem (a constant-step method would
    hover around near-ties). It starts from zero logits, so classes tied in a route's counts stay
    exactly tied (and arg max takes the first, as the document does); `fit_consequents_` is its
    exact minimiser."""
    weights = (route_counts(net, sel, y) + smoothing).double()  # (M, k + 1, C): rows per route and class
    logits = torch.zeros_like(net.logits, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS(
        [logits], max_iter=200, tolerance_grad=1e-12, tolerance_change=1e-14, line_search_fn="strong_wolfe"
    )

    def loss() -> torch.Tensor:
        opt.zero_grad()
        value = -(weights * torch.log_softmax(logits, dim=-1)).sum() / max(1, y.shape[0])
        value.backward()  # type: ignore[no-untyped-call]
        return value

    opt.step(loss)  # type: ignore[no-untyped-call]
    with torch.no_grad():
        net.logits.copy_(logits.float())


def fit_consequents_(net: SoftRuleList, sel: torch.Tensor, y: torch.Tensor, smoothing: float) -> None:
    """Consequent logits = log of the smoothed class frequencies of the rows each route decides."""
    counts = route_counts(net, sel, y).double()
    probs = (counts + smoothing) / (counts.sum(dim=-1, keepdim=True) + smoothing * net.n_classes)
    probs = torch.where(probs.isfinite(), probs, torch.full_like(probs, 1.0 / net.n_classes))
    with torch.no_grad():
        net.logits.copy_(torch.log(probs).float())
