"""Counterfactual explanations read off a crisp rule list (numpy only, no torch, no pandas).

For a record, find the smallest change of feature values that makes a rule predicting another
class (or a requested class) decide: that rule must hold and every earlier rule must fail. For
every feature the search takes the value closest to the record's that satisfies the constraints
put on it so far; while an earlier rule still holds at those values, it branches on which of that
rule's conditions to break (one more constraint per branch; branch and bound on the cost so far,
which constraints only raise). When no earlier rule holds, those values are the cheapest change
under the constraints chosen, so the search is exact. The cost is
lexicographic: fewest changed features, then the smallest sum of range-normalised distances
(numeric: |new - old| / (max - min); categorical: 1). Every answer is verified with
`RuleList.apply` on the changed record; evaluation itself is never re-implemented here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from models.rulelist import CategoryKey, ClassLabel, Condition, Feature, RuleList, category_key

MAX_NODES = 20_000  # search nodes per record; beyond it the best verified answer is returned with exact=False
MAX_DECIMALS = 12  # the finest "data resolution" read off the numbers (their 10 significant digits)

Constraint = tuple[Condition, bool]  # (condition, must it hold?)
Cost = tuple[int, float]  # (features changed, summed normalised distance)


@dataclass(frozen=True)
class Choice:
    """The value chosen for one feature under its constraints."""

    value: Any  # float for numeric features, a category key for categorical ones
    changed: bool
    distance: float

    @property
    def cost(self) -> Cost:
        """This feature's share of the total cost."""
        return (int(self.changed), self.distance)


def _decimals(x: float) -> int:
    """Decimal places of a number's short form (0.25 -> 2, 67.0 -> 0), capped at MAX_DECIMALS."""
    exponent = Decimal(format(x, ".10g")).normalize().as_tuple().exponent
    return min(MAX_DECIMALS, max(0, -int(exponent)))


def _is_missing(value: Any) -> bool:
    return category_key(value) is None or (isinstance(value, str) and not value.strip())


class _NumericChooser:
    """Closest value of one numeric feature satisfying interval constraints (inclusive bounds)."""

    def __init__(self, feature: Feature, raw: Any) -> None:
        self.missing = _is_missing(raw)
        self.x0 = float(feature.fill_value if self.missing else raw)  # type: ignore[arg-type]
        known = [v for v in (None if self.missing else self.x0, feature.min, feature.max) if v is not None]
        self.decimals = max((_decimals(v) for v in known), default=None)
        lo, hi = feature.min, feature.max
        self.scale = (hi - lo) if lo is not None and hi is not None and hi > lo else 1.0

    @property
    def current(self) -> float:
        """The value the rule list evaluates (the fill value when missing)."""
        return self.x0

    def choose(self, constraints: Sequence[Constraint]) -> Choice | None:
        """The feasible value nearest the record's, or None when the constraints contradict."""

        def ok(v: float) -> bool:
            return all(c.holds_scalar(v) == want for c, want in constraints)

        if ok(self.x0):
            return Choice(self.x0, False, 0.0)
        candidates: list[float] = []
        for c, want in constraints:
            if want:  # an inclusive bound of an interval the value must lie in
                candidates += [b for b in (c.low, c.high) if b is not None]
                continue
            if c.low is not None:  # to fail it: strictly below its low ...
                candidates.append(self._beyond(c.low, -1.0, ok))
            if c.high is not None:  # ... or strictly above its high
                candidates.append(self._beyond(c.high, 1.0, ok))
        feasible = [v for v in candidates if not math.isnan(v) and ok(v)]
        if not feasible:
            return None
        best = min(feasible, key=lambda v: (abs(v - self.x0), v))
        return Choice(best, True, abs(best - self.x0) / self.scale)

    def _beyond(self, bound: float, direction: float, ok: Callable[[float], bool]) -> float:
        """The shortest number strictly beyond an inclusive bound that satisfies `ok` (NaN if none):
        the bound rounded at the data's resolution, then finer, then the next float."""
        start = self.decimals if self.decimals is not None else min(MAX_DECIMALS, _decimals(bound) + 1)
        for d in range(start, MAX_DECIMALS + 4):
            step = 10.0**-d
            k = math.floor(bound / step) + 1 if direction > 0 else math.ceil(bound / step) - 1
            v = round(k * step, d)
            if (v - bound) * direction <= 0:  # floating point put it on the bound: one step further
                v = round(v + direction * step, d)
            if (v - bound) * direction > 0 and ok(v):
                return v
        v = float(np.nextafter(bound, direction * math.inf))
        return v if ok(v) else math.nan


class _CategoricalChooser:
    """A known category satisfying in / not_in constraints (training categories first)."""

    def __init__(self, feature: Feature, raw: Any, rules: Sequence[Sequence[Condition]], allow_missing: bool) -> None:
        self.k0 = feature.level_key(category_key(raw))
        named = [v for conds in rules for c in conds if c.feature == feature.name for v in c.values]
        order = dict.fromkeys([*feature.categories, *named, None])
        self.candidates = [k for k in order if k is not None or allow_missing]  # "missing" only when allowed

    @property
    def current(self) -> CategoryKey:
        """The category key the rule list evaluates."""
        return self.k0

    def choose(self, constraints: Sequence[Constraint]) -> Choice | None:
        """The record's category when it satisfies the constraints, else the first one that does."""

        def ok(k: CategoryKey) -> bool:
            return all(c.holds_scalar(k) == want for c, want in constraints)

        if ok(self.k0):
            return Choice(self.k0, False, 0.0)
        for k in self.candidates:
            if k != self.k0 and ok(k):
                return Choice(k, True, 1.0)
        return None


@dataclass(frozen=True)
class _Node:
    """A search state: the constraints put on each feature, the values they lead to, the cost."""

    constraints: dict[str, frozenset[int]]  # per feature: condition id * 2 + (1 if it must hold)
    choices: dict[str, Choice]
    cost: Cost


@dataclass
class _Best:
    cost: Cost
    rule_id: int
    choices: dict[str, Choice]


class _Search:
    """Branch and bound: make the target rule hold, then, while some earlier rule still holds at the
    values chosen so far, branch on which of its conditions to break."""

    def __init__(self, rule_list: RuleList, record: Mapping[str, Any], allow_missing: bool, max_nodes: int) -> None:
        self.rl, self.record, self.max_nodes = rule_list, record, max_nodes
        rules = [r.conditions for r in rule_list.rules]
        self.conds = list(dict.fromkeys(c for cs in rules for c in cs))  # equal conditions share one id
        self.ids = {c: i for i, c in enumerate(self.conds)}
        used = {c.feature for c in self.conds}
        self.choosers: dict[str, _NumericChooser | _CategoricalChooser] = {
            f.name: _NumericChooser(f, record[f.name])
            if f.type == "numeric"
            else _CategoricalChooser(f, record[f.name], rules, allow_missing)
            for f in rule_list.features
            if f.name in used
        }
        self.current = {name: ch.current for name, ch in self.choosers.items()}
        self.memo: dict[tuple[str, frozenset[int]], Choice | None] = {}
        self.best: _Best | None = None
        self.nodes = 0
        self.truncated = False

    def choose(self, feature: str, keys: frozenset[int]) -> Choice | None:
        """Memoised per-feature choice under the constraints `keys`."""
        memo_key = (feature, keys)
        if memo_key not in self.memo:
            constraints = tuple((self.conds[k >> 1], bool(k & 1)) for k in keys)
            self.memo[memo_key] = self.choosers[feature].choose(constraints)
        return self.memo[memo_key]

    def add(self, node: _Node, cond: Condition, hold: bool) -> _Node | None:
        """The node with one more constraint (None when that feature has no value left)."""
        f = cond.feature
        keys = node.constraints.get(f, frozenset()) | {self.ids[cond] * 2 + int(hold)}
        choice = self.choose(f, keys)
        if choice is None:
            return None
        old = node.choices.get(f)
        n, dist = node.cost
        if old is not None:
            n, dist = n - old.cost[0], dist - old.cost[1]
        cost = (n + choice.cost[0], dist + choice.cost[1])
        return _Node({**node.constraints, f: keys}, {**node.choices, f: choice}, cost)

    def start(self, rule_id: int) -> _Node | None:
        """The node where rule `rule_id` holds (the default rule holds by itself)."""
        node: _Node | None = _Node({}, {}, (0, 0.0))
        for c in self.rl.rule(rule_id).conditions if rule_id else ():
            node = self.add(node, c, True) if node is not None else None
        return node

    def run(self, rule_id: int) -> None:
        """Search the cheapest change that makes `rule_id` decide; keeps the best over all calls."""
        node = self.start(rule_id)
        if node is not None:
            earlier = self.rl.rules[: rule_id - 1] if rule_id else self.rl.rules
            self._dfs(rule_id, [r.conditions for r in earlier], node)

    def _dfs(self, rule_id: int, earlier: list[tuple[Condition, ...]], node: _Node) -> None:
        if self.best is not None and node.cost >= self.best.cost:
            return
        self.nodes += 1
        if self.nodes > self.max_nodes:
            self.truncated = True
            return
        values = {**self.current, **{f: ch.value for f, ch in node.choices.items()}}
        branches: list[_Node] | None = None
        for conds in earlier:  # the earlier rules that still hold at these values must be broken
            if all(c.holds_scalar(values[c.feature]) for c in conds):
                options = [child for c in conds if (child := self.add(node, c, False)) is not None]
                if not options:
                    return  # this rule can no longer fail: the target rule is out of reach here
                if branches is None or len(options) < len(branches):
                    branches = options
        if branches is None:  # every earlier rule fails at the cheapest values: nothing below is cheaper
            self._offer(rule_id, node)
            return
        for child in sorted(branches, key=lambda b: b.cost):
            self._dfs(rule_id, earlier, child)

    def _offer(self, rule_id: int, node: _Node) -> None:
        """Keep a leaf as the best answer if applying it really makes `rule_id` decide."""
        choices = {f: ch for f, ch in node.choices.items() if ch.changed}
        changed = apply_changes(self.record, {f: ch.value for f, ch in choices.items()})
        if int(self.rl.apply([changed])[0]) == rule_id:
            self.best = _Best(node.cost, rule_id, choices)


def apply_changes(record: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the record with the given feature values replaced."""
    out = dict(record)
    out.update(changes)
    return out


def _label_key(c: ClassLabel) -> str:
    """The key of a class label in `probabilities` objects (as the service writes them)."""
    if isinstance(c, bool):
        return "true" if c else "false"
    return str(c)


def _wanted(prediction: ClassLabel, now: ClassLabel, wanted: ClassLabel | None) -> bool:
    return prediction != now if wanted is None else prediction == wanted


def _find_class(rule_list: RuleList, wanted: Any) -> ClassLabel:
    for c in rule_list.classes:
        if category_key(c) == category_key(wanted):
            return c
    raise ValueError(f"target_class {wanted!r} is not one of the model's classes {list(rule_list.classes)}")


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _number(v: float) -> float | int:
    return int(v) if float(v).is_integer() and abs(v) < 1e15 else float(v)


def _answer(rl: RuleList, record: Mapping[str, Any], best: _Best, exact: bool) -> dict[str, Any]:
    rule = rl.rule(best.rule_id)
    numeric = {f.name for f in rl.features if f.type == "numeric"}
    changes = [
        {
            "feature": f.name,
            "from": _plain(record[f.name]),
            "to": _number(best.choices[f.name].value) if f.name in numeric else best.choices[f.name].value,
        }
        for f in rl.features
        if f.name in best.choices
    ]
    return {
        "found": True,
        "changes": changes,
        "prediction": rl.prediction_of(best.rule_id),
        "probabilities": {_label_key(c): p for c, p in zip(rl.classes, rule.probabilities, strict=True)},
        "rule_id": best.rule_id,
        "rule_text": "else (default rule)" if best.rule_id == 0 else rule.text(),
        "n_changes": best.cost[0],
        "distance": best.cost[1],
        "exact": exact,
    }


def counterfactual(
    rule_list: RuleList,
    record: Mapping[str, Any],
    *,
    target_class: Any = None,
    allow_missing: bool = False,
    max_nodes: int = MAX_NODES,
) -> dict[str, Any]:
    """The smallest change of the record (fewest features, then smallest normalised distance) that
    makes a rule predicting another class (or `target_class`) decide, verified with `RuleList.apply`."""
    rl = rule_list
    current = int(rl.apply([record])[0])
    now = rl.prediction_of(current)
    wanted = None if target_class is None else _find_class(rl, target_class)
    if wanted is not None and wanted == now:
        return _answer(rl, record, _Best((0, 0.0), current, {}), True)
    ids = [j for j in [*range(1, len(rl.rules) + 1), 0] if _wanted(rl.prediction_of(j), now, wanted)]
    if not ids:
        what = f"class {wanted!r}" if wanted is not None else f"a class other than {now!r}"
        return {"found": False, "reason": f"no rule of the list predicts {what}"}
    search = _Search(rl, record, allow_missing, max_nodes)
    bounds = {j: node.cost for j in ids if (node := search.start(j)) is not None}
    for j in sorted(bounds, key=lambda j: (bounds[j], ids.index(j))):
        search.run(j)
    if search.best is None:
        reason = (
            "the search budget ran out before a change was found"
            if search.truncated
            else "no change of feature values makes a rule predicting another class decide "
            "(its conditions contradict each other or an earlier rule that always holds)"
        )
        return {"found": False, "reason": reason}
    return _answer(rl, record, search.best, not search.truncated)


__all__ = ["Choice", "apply_changes", "counterfactual"]
