"""Extraction reads a network in the crisp set off exactly; snapping and pruning keep it there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

from models.crisp import MIN_WEIGHT
from models.extraction import NotCrisp, check_crisp, extract_rule_list
from models.network import SoftRuleList
from models.stages import Encoded, encode
from models.structure import fit_consequents_, nice_between, prune_predicates_, snap_bounds_, snap_lower, snap_upper


def _frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.uniform(20, 80, n).round(1),
            "smoker": rng.integers(0, 2, n).astype(float),
            "income": np.where(rng.random(n) < 0.1, np.nan, rng.lognormal(10, 1, n)),
            "city": rng.choice(["paris", "rome", "oslo", None], n),
        }
    )


def _crisp_network(enc: Encoded, n_rules: int, seed: int) -> SoftRuleList:
    """A random network projected onto the crisp set (random boxes, weights, tied priorities)."""
    gen = torch.Generator().manual_seed(seed)
    n_inputs = enc.Z.shape[1]
    z = torch.tensor(enc.Z)
    lo, hi = z.min(dim=0).values, z.max(dim=0).values
    a = lo + (hi - lo) * torch.rand(n_rules, n_inputs, generator=gen) * 0.6
    b = a + (hi - lo) * torch.rand(n_rules, n_inputs, generator=gen)
    priority = torch.tensor([3.0, 3.0, 1.0, 2.5, 10.0, 1.0])[:n_rules]  # ties are resolved by index
    net = SoftRuleList(n_inputs, n_rules, 2, a, b, priority, torch.randn(n_rules + 1, 2, generator=gen))
    with torch.no_grad():
        keep = torch.rand(1, n_rules, n_inputs, generator=gen) < 0.35
        net.pred_mask.copy_(keep.float())
        net.weight.copy_(torch.rand(1, n_rules, n_inputs, generator=gen) * 2)
        net.rule_mask[0, 2] = 0.0
    net.project_()
    return net


def _same_partition(net_routes: np.ndarray, list_ids: np.ndarray) -> bool:
    """Every network route maps to one list rule and back (identical routing up to labels)."""
    pairs = set(zip(net_routes.tolist(), list_ids.tolist(), strict=True))
    return len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs})


@pytest.mark.parametrize("seed", range(6))
def test_extraction_is_lossless_on_new_rows(seed: int) -> None:
    train = _frame(400, seed)
    enc = encode(train)
    y = np.random.default_rng(seed).integers(0, 2, len(train))
    net = _crisp_network(enc, 6, seed)
    snap_bounds_(net, enc.grids(np.arange(len(train))))  # short thresholds; no training row moves
    Zt = torch.tensor(enc.Z)
    sel, _ = net.zero_temperature(Zt)
    fit_consequents_(net, sel, torch.tensor(y), 1.0)
    check_crisp(net)
    rl = extract_rule_list(net, enc.encoder, enc.grids(np.arange(len(train))), train, y, [0, 1], 1.0, {})
    new = _frame(3000, seed + 100)
    new.loc[:40, "age"] = np.linspace(-50, 200, 41)  # far outside the training range
    new.loc[41:60, "city"] = "tokyo"  # unseen category
    Zn = torch.tensor(enc.encoder.transform(new), dtype=torch.float32)
    routes, classes = net.zero_temperature(Zn)
    assert _same_partition(routes[0].numpy(), rl.apply(new))
    assert np.array_equal(classes[0].numpy(), rl.predict(new))
    assert np.array_equal(net.zero_temperature(Zt)[1][0].numpy(), rl.predict(train))


@pytest.mark.parametrize("network_consequents", [False, True])
def test_an_unconditional_rule_becomes_the_default_rule(network_consequents: bool) -> None:
    """A rule without predicates decides every row that reaches it: the list ends there, with that rule as its
    else (its consequent, its rows), never `else if true then A` followed by an else that no row reaches."""
    train = _frame(400, 5)
    enc = encode(train)
    y = np.random.default_rng(5).integers(0, 2, len(train))
    net = _crisp_network(enc, 6, 5)  # first-match order 4, 0, 1, 3, 5; rules 4 and 0 fire on training rows
    with torch.no_grad():
        net.pred_mask[0, 1] = 0.0  # third in that order: unconditional
        net.project_()
    Zt = torch.tensor(enc.Z)
    routes, _ = net.zero_temperature(Zt)
    fit_consequents_(net, routes, torch.tensor(y), 1.0)
    classes = net.zero_temperature(Zt)[1]
    check_crisp(net)
    rl = extract_rule_list(
        net, enc.encoder, enc.grids(np.arange(len(train))), train, y, [0, 1], 1.0, {}, network_consequents
    )
    assert all(rule.conditions for rule in rl.rules) and len(rl.rules) == 2
    ids = rl.apply(train)
    assert _same_partition(routes[0].numpy(), ids) and np.array_equal(classes[0].numpy(), rl.predict(train))
    reach = routes[0].numpy() == 1
    assert reach.any() and (ids[reach] == 0).all() and sum(rl.default.class_counts) == int(reach.sum())
    if network_consequents:
        own = torch.softmax(net.logits[0].detach().double(), dim=-1)[1].numpy()
        assert np.allclose(rl.default.probabilities, own)


def test_snapping_moves_no_training_row_and_gives_short_thresholds() -> None:
    train = _frame(300, 1)
    enc = encode(train)
    grids = enc.grids(np.arange(len(train)))
    net = _crisp_network(enc, 5, 1)
    before = net.zero_temperature(torch.tensor(enc.Z))[0]
    snap_bounds_(net, grids)
    assert torch.equal(before, net.zero_temperature(torch.tensor(enc.Z))[0])
    age = grids[0]
    a, t = snap_lower(age, float(age.z[10]) + 1e-3)  # between the 11th and 12th distinct ages
    assert t == nice_between(float(age.values[10]), float(age.values[11])) and len(repr(t)) <= 6
    assert age.z[10] < a < age.z[11]
    assert snap_lower(age, float(age.z[0]) - 1)[1] is None  # below every value: unbounded
    assert snap_upper(age, float(age.z[-1]) + 1)[1] is None
    assert snap_upper(age, float(age.z[0]) - 1)[1] == -np.inf  # nothing passes


def test_a_network_outside_the_crisp_set_is_refused() -> None:
    enc = encode(_frame(100, 2))
    net = _crisp_network(enc, 4, 2)
    with torch.no_grad():
        net.weight[0, 0, 0] = MIN_WEIGHT / 10
        net.pred_mask[0, 0, 0] = 1.0
    with pytest.raises(NotCrisp):
        check_crisp(net)


def test_pruning_keeps_routes_and_bounds_conditions_per_rule() -> None:
    train = _frame(500, 3)
    enc = encode(train)
    net = _crisp_network(enc, 6, 3)
    Z = enc.Z
    before = net.zero_temperature(torch.tensor(Z))[0]
    prune_predicates_(net, Z, enc.unit_feature, max_conditions=10, eps=net.eps)
    # only conditions that re-route no training row were dropped
    assert torch.equal(before, net.zero_temperature(torch.tensor(Z))[0])
    prune_predicates_(net, Z, enc.unit_feature, max_conditions=1, eps=net.eps)
    check_crisp(net)
    on = (net.weight[0] > 0).numpy()
    per_rule = [len(set(enc.unit_feature[np.flatnonzero(on[j])])) for j in range(6)]
    assert max(per_rule) <= 1


def test_whole_number_columns_get_bounds_no_whole_number_row_lies_on() -> None:
    """A bound snapped to an unseen whole number (21 between training values 20 and 22) put every row with
    that value exactly on it: the network's predicate is 1/2 there, so network and list could disagree."""
    from models.estimator import NeuRulesClassifier

    rng = np.random.default_rng(0)
    x = rng.integers(0, 30, 600) * 2  # even values only in training
    other = rng.integers(0, 100, 600)
    y = ((x <= 21) ^ (other < 10)).astype(int)
    X = pd.DataFrame({"x": x, "other": other})
    clf = NeuRulesClassifier(n_rules=3, random_state=0, n_restarts=2, target_steps=200).fit(X, y)
    conditions = [c for r in clf.rule_list_.rules for c in r.conditions if c.op == "between"]
    bounds = [v for c in conditions for v in (c.low, c.high) if v is not None]
    assert bounds and not any(float(v).is_integer() for v in bounds), clf.rule_list_.to_text()
    unseen = pd.DataFrame({"x": np.arange(-1, 62), "other": np.arange(63) % 100})  # odd x: never seen in training
    assert np.array_equal(clf.predict_network(unseen, stage="final"), clf.predict(unseen))
    # a stage snapped before the last one (no half-unit move) still reads off as short decimals, not 20.99999975
    pruned = clf.network_rule_list(X, y, stage="pruned")
    early = [v for r in pruned.rules for c in r.conditions if c.op == "between" for v in (c.low, c.high)]
    assert all(v is None or float(f"{v:.6g}") == v for v in early), pruned.to_text()


def test_columns_written_with_few_decimals_get_bounds_no_such_row_lies_on() -> None:
    """As for whole numbers, one decimal further: in a column of two decimals, a bound snapped to an unseen
    12.37 (between training values 12.36 and 12.38) put every test row of 12.37 on it (a tie)."""
    from models.estimator import NeuRulesClassifier

    rng = np.random.default_rng(1)
    x = np.round(rng.integers(0, 300, 800) * 0.02 + 10.0, 2)  # even hundredths only in training
    other = rng.integers(0, 100, 800)
    y = ((x <= 12.37) ^ (other < 10)).astype(int)
    X = pd.DataFrame({"x": x, "other": other})
    clf = NeuRulesClassifier(n_rules=3, random_state=0, n_restarts=2, target_steps=200).fit(X, y)
    bounds = [c for r in clf.rule_list_.rules for c in r.conditions if c.op == "between" and c.feature == "x"]
    values = [v for c in bounds for v in (c.low, c.high) if v is not None]
    assert values and not any(abs(v * 100 - round(v * 100)) < 1e-6 for v in values), clf.rule_list_.to_text()
    assert all(len(repr(v).split(".")[-1]) <= 3 for v in values), clf.rule_list_.to_text()  # still short
    odd = np.round(np.arange(500, 800) * 0.02 - 0.01, 2)  # odd hundredths 9.99..15.97: never seen
    unseen = pd.DataFrame({"x": odd, "other": np.arange(len(odd)) % 100})
    assert np.array_equal(clf.predict_network(unseen, stage="final"), clf.predict(unseen))


def test_columns_of_one_decimal_get_bounds_no_such_row_lies_on() -> None:
    """As for whole numbers, one decimal further: in a column of one decimal, a bound snapped to an unseen
    12.3 (between training values 12.2 and 12.4) put every test row of 12.3 on it (a tie): it reads 12.25 or
    12.35. Two decimals and more keep the short threshold (`bp <= 107.505` was what nobody reads)."""
    from models.estimator import NeuRulesClassifier

    rng = np.random.default_rng(1)
    x = np.round(rng.integers(0, 30, 800) * 0.2 + 10.0, 1)  # even tenths only in training
    other = rng.integers(0, 100, 800)
    y = ((x <= 12.3) ^ (other < 10)).astype(int)
    X = pd.DataFrame({"x": x, "other": other})
    clf = NeuRulesClassifier(n_rules=3, random_state=0, n_restarts=2, target_steps=200).fit(X, y)
    bounds = [c for r in clf.rule_list_.rules for c in r.conditions if c.op == "between" and c.feature == "x"]
    values = [v for c in bounds for v in (c.low, c.high) if v is not None]
    assert values and not any(abs(v * 10 - round(v * 10)) < 1e-6 for v in values), clf.rule_list_.to_text()
    assert all(len(repr(v).split(".")[-1]) <= 2 for v in values), clf.rule_list_.to_text()  # still short
    odd = np.round(np.arange(50, 80) * 0.2 - 0.1, 1)  # odd tenths 9.9..15.7: never seen
    unseen = pd.DataFrame({"x": odd, "other": np.arange(len(odd)) % 100})
    assert np.array_equal(clf.predict_network(unseen, stage="final"), clf.predict(unseen))


def test_value_decimals_finds_the_fewest_decimals_that_write_every_value() -> None:
    from models.structure import MAX_DECIMALS, value_decimals

    assert value_decimals(np.array([1.0, 20.0, -3.0])) == 0
    assert value_decimals(np.array([12.37, 0.1, 3.0])) == 2  # 12.37 * 100 is 1236.9999999999998 in binary
    assert value_decimals(np.array([0.5, 1e9 + 0.25])) == 2
    assert value_decimals(np.array([1 / 3])) is None and value_decimals(np.array([])) is None
    assert value_decimals(np.array([10.0**-MAX_DECIMALS])) == MAX_DECIMALS


def test_a_bound_moves_off_the_grid_only_inside_its_gap_and_never_onto_the_fill_value() -> None:
    from models.structure import UnitGrid

    def grid(values: list[float], fill: float) -> UnitGrid:
        v = np.array(values)
        return UnitGrid(0, v, v.astype(np.float32), 0.0, 1.0, decimals=0, fill_value=fill)

    plain = grid([18.0, 20.0, 22.0], fill=19.0)
    assert snap_lower(plain, 21.0, True)[1] == 20.5 and snap_upper(plain, 21.0, True)[1] == 21.5
    assert snap_lower(plain, 21.0)[1] == 21.0  # not in the earlier snaps
    median = grid([18.0, 20.0, 22.0], fill=20.5)  # a missing test row becomes 20.5: no bound there
    assert snap_lower(median, 21.0, True)[1] == 21.0 and snap_upper(median, 21.0, True)[1] == 21.5
    narrow = grid([20.0, 20.5, 22.0], fill=20.5)  # missing training rows: 20.5 is a training value
    assert snap_lower(narrow, 21.0, True)[1] == 21.0  # 20.5 would move the filled rows' side
    one = UnitGrid(0, np.array([12.2, 12.4]), np.array([12.2, 12.4], dtype=np.float32), 0.0, 1.0, 1, None)
    assert snap_upper(one, 12.3, True)[1] == 12.35  # still short
    hundredths = UnitGrid(0, np.array([12.36, 12.38]), np.array([12.36, 12.38], dtype=np.float32), 0.0, 1.0, 2, None)
    assert snap_upper(hundredths, 12.37, True)[1] == 12.375  # 12.37 has the column's two decimals: moved, short
    # a learner probe read `bp <= 107.505` (a column of two decimals, training values 107 and 108): 107.5 now
    two = UnitGrid(0, np.array([107.0, 108.0]), np.array([107.0, 108.0], dtype=np.float32), 0.0, 1.0, 2, None)
    assert snap_upper(two, 107.5, True)[1] == 107.5 and snap_lower(two, 107.5, True)[1] == 107.5
    tenths = UnitGrid(0, np.array([3432.0, 4254.0]), np.array([3432.0, 4254.0], dtype=np.float32), 0.0, 1.0, 1, None)
    assert snap_upper(tenths, 4000.0, True)[1] == 4000  # not 4000.05
    wide = UnitGrid(0, np.array([120000.0, 120002.0]), np.array([120000.0, 120002.0], dtype=np.float32), 0.0, 1.0, 0)
    assert snap_upper(wide, 120001.0, True)[1] == 120001.5 and snap_lower(wide, 120001.0, True)[1] == 120000.5
    big = np.array([1.6e13, 1.8e13])  # whole numbers, but .5 on 16900000000000 reads as 15 digits
    huge = UnitGrid(0, big, big.astype(np.float32), 0.0, 1.0, decimals=0, fill_value=None)
    assert snap_upper(huge, 1.7e13, True)[1] == 1.7e13
    # a column of six decimals (heart's -0.333333 ... 1): 0.7 stays 0.7; a console probe read 0.7000005 in rules
    six = np.array([0.333333, 1.0])
    fine = UnitGrid(0, six, six.astype(np.float32), 0.0, 1.0, decimals=6, fill_value=None)
    assert snap_upper(fine, 0.5, True)[1] == 0.7 and snap_lower(fine, 0.5, True)[1] == 0.7
