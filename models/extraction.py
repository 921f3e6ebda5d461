"""A trained network -> its crisp `RuleList`, read off exactly (the `extract` stage of fit).

The network must be in the crisp set (`SoftRuleList.project_`: every kept predicate weighs at
least MIN_WEIGHT, priorities in [PRIORITY_MIN, PRIORITY_MAX], eps <= MAX_EPS): then at zero
temperature a rule is selected exactly when all its weighted predicates hold and no rule before
it in `first_match_order` does, so the list below decides every row as the network does, up to
rows lying exactly on a bound (the soft predicate is 1/2 there). Nothing is pruned or refitted
here: a predicate is left out only when it holds on every input (both bounds infinite, or a
one-hot input whose interval holds 0 and 1), and a rule only when it can never fire or an
unconditional rule precedes it. The first unconditional rule becomes the list's default (else) rule,
so a list never ends `else if true then ...` followed by an `else` no row reaches. Thresholds are the
short decimals of `structure.snap_bounds_` where the bound is snapped, else the exact bound in original
units.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from models.encoding import TabularEncoder
from models.network import MAX_EPS, MIN_WEIGHT, SoftRuleList, first_match_order
from models.relaxations import ordered_bounds
from models.rulelist import Condition, RuleList
from models.structure import UnitGrid, nice_between, snap_lower, snap_upper


class NotCrisp(ValueError):
    """The network is not in the crisp set, so it is not exactly a rule list."""


def _threshold(grid: UnitGrid, bound: float, lower: bool) -> float | None:
    """The bound in original units: the snapped short decimal when the bound is one, else exact.
    None: unbounded; +inf (lower) / -inf (upper): nothing can pass."""
    if np.isinf(bound):
        return None if (bound < 0) == lower else bound
    for off_grid in (True, False):  # the last snap moves thresholds off the decimal grid; a "pruned" snapshot did not
        snapped, short = snap_lower(grid, bound, off_grid) if lower else snap_upper(grid, bound, off_grid)
        if short is not None and np.isfinite(short) and np.float32(snapped) == np.float32(bound):
            return short
    return float(np.float64(np.float32(bound)) * grid.scale + grid.mean)


def _numeric(name: str, grid: UnitGrid, a: float, b: float) -> Condition | bool | None:
    """The condition of a numeric predicate; None when it always holds, False when never."""
    low, high = _threshold(grid, a, True), _threshold(grid, b, False)
    if (low is not None and low == np.inf) or (high is not None and high == -np.inf):
        return False
    if low is not None and high is not None and low > high:
        return False
    if low is None and high is None:
        return None
    return Condition(feature=name, op="between", low=low, high=high)


def _categorical(name: str, levels: list[str | None], need: Mapping[str | None, bool]) -> Condition | bool | None:
    """The condition of a feature's one-hot predicates: need[level] = must (not) be that level."""
    required = [lv for lv, one in need.items() if one]
    excluded = [lv for lv, one in need.items() if not one]
    if len(required) > 1 or (required and required[0] in excluded):
        return False
    if required:
        return Condition(feature=name, op="in", values=(required[0],))
    if not excluded:
        return None
    return Condition(feature=name, op="not_in", values=tuple(lv for lv in levels if lv in set(excluded)))


def rule_conditions(
    encoder: TabularEncoder, grids: list[UnitGrid], a: np.ndarray, b: np.ndarray, w: np.ndarray
) -> list[Condition] | None:
    """Conditions of one rule (ordered bounds a <= b and weights per input); None: never fires."""
    conds: list[Condition] = []
    onehot: dict[int, dict[str | None, bool]] = {}
    for f in np.flatnonzero(w > 0):
        unit = encoder.units[f]
        spec = encoder.columns[unit.feature]
        if unit.kind == "numeric":
            cond = _numeric(spec.name, grids[f], float(a[f]), float(b[f]))
            if cond is False:
                return None
            if isinstance(cond, Condition):
                conds.append(cond)
            continue
        has0, has1 = bool(a[f] < 0.0 < b[f]), bool(a[f] < 1.0 < b[f])
        if not (has0 or has1):
            return None
        if has0 != has1:
            onehot.setdefault(unit.feature, {})[unit.level] = has1
    for feat, need in sorted(onehot.items()):
        spec = encoder.columns[feat]
        cond = _categorical(spec.name, spec.levels, need)
        if cond is False:
            return None
        if isinstance(cond, Condition):
            conds.append(cond)
    position = {spec.name: i for i, spec in enumerate(encoder.columns)}
    return sorted(conds, key=lambda c: position[c.feature])


def check_crisp(net: SoftRuleList) -> None:
    """Raise NotCrisp unless the single-model network is exactly a rule list at zero temperature."""
    if net.n_models != 1:
        raise ValueError("extract from a single rule list: use net.select(m)")
    w = (torch.relu(net.weight) * net.pred_mask)[0]
    if net.eps > MAX_EPS or bool(((w > 0) & (w < MIN_WEIGHT * (1 - 1e-6))).any()):
        raise NotCrisp("the network has predicates too light to block their rule: project it first")


def extract_rule_list(
    net: SoftRuleList,
    encoder: TabularEncoder,
    grids: list[UnitGrid],
    X: Any,
    y: np.ndarray,
    classes: list[Any],
    smoothing: float,
    metadata: Mapping[str, Any],
    network_consequents: bool = False,
) -> RuleList:
    """The crisp rule list that the single-model network is at zero temperature, with class
    counts and smoothed probabilities measured on the training rows (X, y labels).

    network_consequents: probabilities = softmax of the network's own consequent logits instead
    (an audit copy that predicts exactly as the network; the served list uses measured ones)."""
    check_crisp(net)
    with torch.no_grad():
        a_t, b_t = ordered_bounds(net.lower, net.upper)
        a, b = a_t[0].cpu().numpy().astype(np.float64), b_t[0].cpu().numpy().astype(np.float64)
        w = (torch.relu(net.weight) * net.pred_mask)[0].cpu().numpy()
        priority = net.priority[0].cpu().numpy()
        alive = net.rule_mask[0].cpu().numpy() > 0
        own = torch.softmax(net.logits[0].double(), dim=-1).cpu().numpy()
    rules: list[list[Condition]] = []
    kept: list[int] = []
    default = net.n_rules  # the network's default rule, unless an unconditional rule comes first
    for j in first_match_order(priority, alive):
        conds = rule_conditions(encoder, grids, a[j], b[j], w[j])
        if conds is None:
            continue
        if not conds:  # it decides every row that reaches it: it is the list's default (else) rule
            default = j
            break
        rules.append(conds)
        kept.append(j)
    return RuleList.build(
        classes=classes,
        features=encoder.features(),
        rules=rules,
        X=X,
        y=y,
        smoothing=smoothing,
        metadata=dict(metadata),
        probabilities=[own[j] for j in [*kept, default]] if network_consequents else None,
    )


__all__ = ["NotCrisp", "check_crisp", "extract_rule_list", "nice_between", "rule_conditions"]
