"""The small units of fit: greedy tree, seeding, inner split and selection, budget, batches."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
sklearn_tree = pytest.importorskip("sklearn.tree")

from models.budget import BudgetRequest, plan_budget
from models.greedy_tree import grow_tree
from models.seeding import SeedData, initial_restarts, restart_kinds
from models.selection import choose_restart, inner_split
from models.stages import SeedSettings, encode, initialise
from models.training import batches
from tests.models.conftest import toy_frame


def _leaf_predictions(leaves, Z: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
    pred = np.full(len(Z), -1)
    for leaf in leaves:
        inside = np.all((leaf.lower < Z) & (leaf.upper >= Z), axis=1)
        assert (pred[inside] == -1).all()  # leaves are disjoint
        pred[inside] = np.argmax(leaf.counts)
    return pred


def test_greedy_tree_grows_the_same_tree_as_scikit_learn() -> None:
    X, y = toy_frame(600, seed=5)
    enc = encode(X)
    rng = np.random.default_rng(0)
    y = np.where(rng.random(len(y)) < 0.15, 1 - y, y)  # noise: the tree needs all its leaves
    leaves = grow_tree(enc.Z, y, 2, 11)
    ours = _leaf_predictions(leaves, enc.Z)
    assert (ours >= 0).all() and len(leaves) == 11
    ref = sklearn_tree.DecisionTreeClassifier(max_leaf_nodes=11, random_state=0).fit(enc.Z, y)
    assert np.mean(ours == ref.predict(enc.Z)) >= 0.99
    assert sum(int(leaf.counts.sum()) for leaf in leaves) == len(y)


def test_tree_restart_starts_as_the_tree() -> None:
    X, y = toy_frame(500, seed=6)
    y = np.where(np.random.default_rng(1).random(len(y)) < 0.1, 1 - y, y)
    enc = encode(X)
    settings = SeedSettings(n_rules=6, n_classes=2, free_weight=0.5, max_candidates=None, eps=1e-3)
    net, kinds = initialise(enc, y, np.arange(len(y)), 1, settings, np.random.default_rng(0))
    assert kinds == ("tree",)
    z = torch.tensor(enc.Z)
    lo, hi = z.min(dim=0).values, z.max(dim=0).values
    with torch.no_grad():  # keep only the seeds (bounds inside the range): the tree's own conditions
        seeded = (net.lower > lo) | (net.upper < hi)
        net.pred_mask.copy_(seeded.float())
    net.project_()
    tree = _leaf_predictions(grow_tree(enc.Z, y, 2, 7), enc.Z)
    _, cls = net.zero_temperature(z)
    assert np.array_equal(cls[0].numpy(), tree)


def test_restart_kinds_cycle_through_the_pool() -> None:
    assert restart_kinds(1) == ("tree",)
    assert restart_kinds(6) == ("tree", "quantile", "score", "tree_coarse", "quantile", "score")
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(200, 3))
    y = (Z[:, 0] > 0).astype(np.int64)
    data = SeedData(Z, y, 2, 4, np.full(3, 0.5), None)
    init = initial_restarts(data, restart_kinds(4), rng)
    assert init.lower.shape == (4, 4, 3) and init.logits.shape == (4, 5, 2)
    assert (init.lower <= init.upper).all() and (init.priority >= 1).all()


def test_tree_restarts_do_not_depend_on_random_state() -> None:
    from models import NeuRulesClassifier

    X, y = toy_frame(300, seed=8)
    fits = [NeuRulesClassifier(n_rules=4, n_restarts=4, target_steps=100, random_state=s).fit(X, y) for s in (1, 2)]
    tree = [f.restart_networks_.select(0) for f in fits]  # restart 0 is the tree kind
    assert all(f.restart_kinds_[0] == "tree" for f in fits)
    assert torch.equal(tree[0].lower, tree[1].lower) and torch.equal(tree[0].weight, tree[1].weight)
    quantile = [f.restart_networks_.select(1) for f in fits]  # a random kind follows the seed
    assert not torch.equal(quantile[0].lower, quantile[1].lower)


def test_inner_split_is_stratified_and_choice_uses_held_out_first() -> None:
    y = np.array([0] * 80 + [1] * 20)
    fit, held = inner_split(y, 0.25, np.random.default_rng(0))
    assert len(np.intersect1d(fit, held)) == 0 and len(fit) + len(held) == 100
    assert (y[held] == 1).sum() == 5 and (y[held] == 0).sum() == 20
    assert len(inner_split(y, 0.0, np.random.default_rng(0))[1]) == 0
    assert choose_restart(np.array([0.7, 0.8, 0.8]), np.array([0.9, 0.85, 0.95])) == 2
    assert choose_restart(np.array([0.8, 0.8]), np.array([0.9, 0.9])) == 0


def _request(epochs: int | str) -> BudgetRequest:
    return BudgetRequest(10, epochs, 1024, "auto", 8, 600, 20, 300, 0.2, 0.1)


def test_budget_shares_a_fixed_number_of_epochs_and_counts_steps_otherwise() -> None:
    fixed = plan_budget(_request(10), 800, 1000, 5, 3)
    assert fixed.total_epochs == 10 and fixed.main_epochs >= 7
    auto = plan_budget(_request("auto"), 20_000, 20_000, 6, 100)
    assert auto.refit_epochs == 0  # nothing held out: no refit
    steps = auto.main_epochs * -(-20_000 // auto.batch_size)
    assert 600 <= steps < 600 + 20_000 / auto.batch_size
    assert 4 <= auto.n_restarts <= 8


def test_batches_cover_every_row_with_a_fixed_size() -> None:
    perm = torch.randperm(10)
    got = batches(perm, 4)
    assert [len(b) for b in got] == [4, 4, 4]
    assert set(torch.cat(got).tolist()) == set(range(10))
    assert [len(b) for b in batches(perm, 10)] == [10]
