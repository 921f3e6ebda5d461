"""Trained network -> crisp rule-list document in the original units of the data.

The network is then rewritten to be exactly that rule list (snapped bounds, pruned predicates and
rules, consequent logits = log of the measured smoothed frequencies), so that the soft model at
zero temperature and the crisp list decide every training row identically.

Before the rewrite, a greedy post-pruning pass (`_prune`) drops conditions, then whole rules,
whenever the crisp list's training weighted F1 does not decrease (ties -> the shorter list), so
near-vacuous conditions such as `age <= 87` are dropped unless they help on the training rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from models.encoding import TabularEncoder
from models.network import MIN_WEIGHT, PRIORITY_MAX, PRIORITY_MIN, SoftRuleList
from models.rulelist import FORMAT, VERSION, smoothed_probabilities

BIG = 1e30  # "unbounded" in standardised units


def nice_between(lo: float, hi: float) -> float:
    """A short decimal strictly between lo < hi (the midpoint when none is shorter)."""
    mid = lo + (hi - lo) / 2.0
    for digits in range(1, 18):
        t = float(f"{mid:.{digits}g}")
        if lo < t < hi:
            return t
    return mid


def _sort_keys(values: set[str | None]) -> list[str | None]:
    return sorted(values, key=lambda v: (v is None, v or ""))


def _numeric_condition(
    z: np.ndarray, xo: np.ndarray, a: float, b: float, mean: float, scale: float
) -> tuple[dict[str, Any] | None, float, float, bool]:
    """(condition or None when always true, new a, new b, dead) for one numeric predicate."""
    ge = z >= a
    le = z <= b
    if not (ge & le).any():
        return None, a, b, True
    low: float | None = None
    high: float | None = None
    new_a, new_b = -BIG, BIG
    if not ge.all():
        x1, x2 = float(xo[~ge].max()), float(xo[ge].min())
        low = nice_between(x1, x2)
        new_a = (low - mean) / scale
        z1, z2 = float(z[~ge].max()), float(z[ge].min())
        if not (z1 < np.float32(new_a) < z2):
            new_a = z1 + (z2 - z1) / 2.0
    if not le.all():
        x1, x2 = float(xo[le].max()), float(xo[~le].min())
        high = nice_between(x1, x2)
        new_b = (high - mean) / scale
        z1, z2 = float(z[le].max()), float(z[~le].min())
        if not (z1 < np.float32(new_b) < z2):
            new_b = z1 + (z2 - z1) / 2.0
    if low is None and high is None:
        return None, new_a, new_b, False
    return {"op": "between", "low": low, "high": high}, new_a, new_b, False


def _list_score(order: list[int], fires: np.ndarray, y: np.ndarray, n_classes: int) -> float:
    """Training weighted F1 of the first-match list `order` (rule indices, each rule's class the
    majority of the rows it captures, then the default rule on the rest)."""
    n = y.shape[0]
    first = np.full(n, len(order), dtype=np.int64)
    open_ = np.ones(n, dtype=bool)
    for r, j in enumerate(order):
        cap = fires[j] & open_
        first[cap] = r
        open_ &= ~cap
    counts = np.bincount(first * n_classes + y, minlength=(len(order) + 1) * n_classes)
    cls = np.argmax(counts.reshape(len(order) + 1, n_classes), axis=1)
    pred = cls[first]
    conf = np.bincount(y * n_classes + pred, minlength=n_classes * n_classes).reshape(n_classes, n_classes)
    tp = np.diag(conf).astype(np.float64)
    support = conf.sum(axis=1)
    denom = support + conf.sum(axis=0)
    f1 = np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0)
    return float(np.sum(f1 * support) / max(1, n))


def _prune(
    items: list[list[tuple[dict[str, Any], list[int], np.ndarray]]],
    fires: np.ndarray,
    alive: np.ndarray,
    new_w: np.ndarray,
    prio: np.ndarray,
    y: np.ndarray,
    n_classes: int,
) -> None:
    """Greedy post-pruning, in place: for each rule in list order, drop each condition whose
    removal does not lower the training weighted F1 of the crisp list (ties -> the shorter list);
    then drop each whole rule under the same test. Dropped conditions get weight 0 and dropped
    rules are marked dead, so that the rewritten network equals the pruned list."""
    k = len(items)
    order = [j for j in sorted(range(k), key=lambda j: (-prio[j], j)) if alive[j]]
    if not order:
        return
    best = _list_score(order, fires, y, n_classes)
    tol = 1e-12
    for j in order:
        fail = np.zeros(y.shape[0], dtype=np.int32)
        for _, _, rows in items[j]:
            fail += ~rows
        kept_items = []
        for idx, item in enumerate(items[j]):
            rows = item[2]
            trial_fail = fail - ~rows
            saved = fires[j].copy()
            fires[j] = trial_fail == 0
            score = _list_score(order, fires, y, n_classes)
            if score >= best - tol:
                best = max(best, score)
                fail = trial_fail
                for f in item[1]:
                    new_w[j, f] = 0.0
            else:
                fires[j] = saved
                kept_items.append(item)
        items[j] = kept_items
    for j in list(order):
        trial = [i for i in order if i != j]
        score = _list_score(trial, fires, y, n_classes)
        if score >= best - tol:
            best = max(best, score)
            order = trial
            alive[j] = False
            items[j] = []


def extract_rule_list(
    net: SoftRuleList,
    encoder: TabularEncoder,
    Z: np.ndarray,
    raw: list[np.ndarray],
    y: np.ndarray,
    classes: list[Any],
    smoothing: float = 1.0,
    target: str = "target",
    metadata: dict[str, Any] | None = None,
    rewrite: bool = True,
    prune: bool = True,
) -> tuple[dict[str, Any], np.ndarray]:
    """Build the crisp rule-list document from a trained network and its training data.

    Z is the float32 matrix the network was trained on, raw the filled original columns
    (`TabularEncoder.raw_columns`), y the class indices; `net` holds one rule list (M = 1).
    Returns (document, predicted class index of every training row under the crisp list). With
    rewrite=True the network is rewritten in place to equal the returned rule list. With
    prune=True conditions, then rules, are dropped greedily while the training weighted F1 of the
    crisp list does not decrease (see `_prune`).
    """
    if net.n_models != 1:
        raise ValueError("extract from a single rule list: use net.select(m)")
    n_classes = len(classes)
    with torch.no_grad():
        lower = net.lower[0].detach().cpu().double().numpy()
        upper = net.upper[0].detach().cpu().double().numpy()
        a_all = np.minimum(lower, upper).astype(np.float32)
        b_all = np.maximum(lower, upper).astype(np.float32)
        w_all = torch.relu(net.weight[0]).detach().cpu().numpy()
        prio = (net.priority[0] * net.rule_mask[0]).detach().cpu().numpy()
        mask = net.rule_mask[0].detach().cpu().numpy()
    Z = np.asarray(Z, dtype=np.float32)
    n, n_units = Z.shape
    k = net.n_rules

    new_lower = a_all.astype(np.float64).copy()
    new_upper = b_all.astype(np.float64).copy()
    new_w = np.where(w_all >= MIN_WEIGHT, w_all, 0.0)
    alive = mask > 0
    rule_conditions: list[list[dict[str, Any]]] = [[] for _ in range(k)]
    fires = np.zeros((k, n), dtype=bool)

    # per rule: its conditions as (document condition, input units, rows that satisfy it)
    items: list[list[tuple[dict[str, Any], list[int], np.ndarray]]] = [[] for _ in range(k)]
    for j in range(k):
        if not alive[j]:
            continue
        onehot: dict[
            int, tuple[set[str | None], set[str | None], list[int], np.ndarray]
        ] = {}  # feature -> (req1, req0, units, rows)
        for f in range(n_units):
            if new_w[j, f] <= 0:
                continue
            unit = encoder.units[f]
            spec = encoder.columns[unit.feature]
            a, b = float(a_all[j, f]), float(b_all[j, f])
            if unit.kind == "numeric":
                cond, na, nb, dead = _numeric_condition(Z[:, f], raw[unit.feature], a, b, spec.mean, spec.scale)
                if dead:
                    alive[j] = False
                    break
                if cond is None:
                    new_w[j, f] = 0.0
                    continue
                new_lower[j, f], new_upper[j, f] = na, nb
                rows = (Z[:, f] >= np.float32(na)) & (Z[:, f] <= np.float32(nb))
                items[j].append(
                    (
                        {
                            "feature": spec.name,
                            "op": "between",
                            "low": cond["low"],
                            "high": cond["high"],
                        },
                        [f],
                        rows,
                    )
                )
            else:
                has0 = a <= 0.0 <= b
                has1 = a <= 1.0 <= b
                if has0 and has1:
                    new_w[j, f] = 0.0
                    continue
                if not has0 and not has1:
                    alive[j] = False
                    break
                req1, req0, units, rows = onehot.setdefault(unit.feature, (set(), set(), [], np.ones(n, dtype=bool)))
                units.append(f)
                if has1:
                    req1.add(unit.level)
                    new_lower[j, f], new_upper[j, f] = 0.5, BIG
                else:
                    req0.add(unit.level)
                    new_lower[j, f], new_upper[j, f] = -BIG, 0.5
                rows &= (Z[:, f] >= np.float32(new_lower[j, f])) & (Z[:, f] <= np.float32(new_upper[j, f]))
        if not alive[j]:
            continue
        for feat, (req1, req0, units, rows) in sorted(onehot.items()):
            spec = encoder.columns[feat]
            if req1:
                allowed = {lv for lv in spec.levels if {lv} >= req1 and lv not in req0}
                if not allowed:
                    alive[j] = False
                    break
                cond_doc = {
                    "feature": spec.name,
                    "op": "in",
                    "values": _sort_keys(allowed),
                }
            else:
                cond_doc = {
                    "feature": spec.name,
                    "op": "not_in",
                    "values": _sort_keys(req0),
                }
            items[j].append((cond_doc, units, rows))
        if alive[j]:
            fire = np.ones(n, dtype=bool)
            for _, _, rows in items[j]:
                fire &= rows
            fires[j] = fire

    if prune:
        _prune(items, fires, alive, new_w, prio, y, n_classes)
    for j in range(k):
        rule_conditions[j] = [c for c, _, _ in items[j]]

    # first-match order: priority descending, ties by index (as argmax does)
    order = [j for j in sorted(range(k), key=lambda j: (-prio[j], j)) if alive[j]]
    open_ = np.ones(n, dtype=bool)
    captured: dict[int, np.ndarray] = {}
    for j in order:
        cap = fires[j] & open_
        captured[j] = cap
        open_ &= ~cap
    kept = [j for j in order if captured[j].any()]
    for j in range(k):
        if j not in kept:
            alive[j] = False

    def counts_of(rows: np.ndarray) -> list[int]:
        return [int(c) for c in np.bincount(y[rows], minlength=n_classes)]

    order_in_feature = {spec.name: i for i, spec in enumerate(encoder.columns)}
    rules_doc = []
    rule_probs = []
    train_pred = np.zeros(n, dtype=np.int64)
    for j in kept:
        cc = counts_of(captured[j])
        probs = list(smoothed_probabilities(cc, smoothing))
        conds = sorted(rule_conditions[j], key=lambda c: order_in_feature[c["feature"]])
        rules_doc.append({"conditions": conds, "class_counts": cc, "probabilities": probs})
        rule_probs.append(probs)
        train_pred[captured[j]] = int(np.argmax(probs))
    dc = counts_of(open_)
    dprobs = list(smoothed_probabilities(dc, smoothing))
    train_pred[open_] = int(np.argmax(dprobs))
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "target": target,
        "classes": list(classes),
        "features": encoder.feature_dicts(),
        "rules": rules_doc,
        "default": {"class_counts": dc, "probabilities": dprobs},
        "smoothing": float(smoothing),
        "metadata": dict(metadata or {}),
    }

    if rewrite:
        with torch.no_grad():
            dev = net.lower.device
            new_mask = torch.tensor(alive.astype(np.float32), device=dev)
            for j in range(k):
                if not alive[j]:
                    new_w[j] = 0.0
            net.lower[0].copy_(torch.tensor(new_lower, dtype=torch.float32, device=dev))
            net.upper[0].copy_(torch.tensor(new_upper, dtype=torch.float32, device=dev))
            net.weight[0].copy_(torch.tensor(new_w, dtype=torch.float32, device=dev))
            net.rule_mask[0].copy_(new_mask)
            logits = net.logits[0].detach().cpu().numpy().copy()
            for j, probs in zip(kept, rule_probs):
                logits[j] = np.log(np.asarray(probs))
            logits[k] = np.log(np.asarray(dprobs))
            net.logits[0].copy_(torch.tensor(logits, dtype=torch.float32, device=dev))
            # distinct, evenly spaced priorities in the kept order: ties in the trained
            # priorities (e.g. several at the clamp) would otherwise be broken by rounding noise
            prio_new = net.priority[0].detach().cpu().numpy().copy()
            for rank, j in enumerate(kept):
                prio_new[j] = PRIORITY_MAX - (PRIORITY_MAX - PRIORITY_MIN) * rank / max(1, k)
            net.priority[0].copy_(torch.tensor(prio_new, dtype=torch.float32, device=dev))
    return doc, train_pred


def rule_ids_from_selection(net: SoftRuleList, sel: np.ndarray) -> np.ndarray:
    """Map selector indices of a single-model network (0..k-1 rules, k default) to document
    rule ids (1..; 0 = default)."""
    prio = (net.priority[0] * net.rule_mask[0]).detach().cpu().numpy()
    mask = net.rule_mask[0].detach().cpu().numpy()
    k = net.n_rules
    order = [j for j in sorted(range(k), key=lambda j: (-prio[j], j)) if mask[j] > 0]
    table = np.zeros(k + 1, dtype=np.int64)
    for rid, j in enumerate(order, start=1):
        table[j] = rid
    return table[sel]
