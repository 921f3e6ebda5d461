"""Cross-fitted choice of the seeding kind (`models.crossfit`) and its use in fit."""

from __future__ import annotations

import numpy as np
import pytest

from models.crossfit import (
    AUTO_FOLDS,
    CROSSFIT_MAX_ROWS,
    auto_folds,
    best_within_kinds,
    choose_kind,
    out_of_fold,
    paired_margin,
    stratified_folds,
)
from tests.models.conftest import toy_frame


def test_auto_folds_by_data_size() -> None:
    assert auto_folds("auto", CROSSFIT_MAX_ROWS) == AUTO_FOLDS
    assert auto_folds("auto", CROSSFIT_MAX_ROWS + 1) == 0
    assert auto_folds(3, 10**6) == 3 and auto_folds(0, 10) == 0


def test_stratified_folds_partition_the_rows_and_keep_class_shares() -> None:
    y = np.array([0] * 40 + [1] * 12)
    folds = stratified_folds(y, 4, np.random.default_rng(0))
    assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(len(y)))
    assert [int((y[f] == 1).sum()) for f in folds] == [3, 3, 3, 3]


def test_best_within_kinds() -> None:
    kinds = ("tree", "quantile", "score", "quantile")
    training = np.array([0.95, 0.80, 0.90, 0.90])
    assert best_within_kinds(kinds, training) == {"tree": 0, "quantile": 3, "score": 2}
    assert best_within_kinds(kinds, np.array([0.9, 0.8, 0.8, 0.8]))["quantile"] == 1  # ties: lowest index


def test_out_of_fold_predictions_come_from_the_training_best_restart() -> None:
    y = np.array([0, 1] * 10)
    kinds = ("tree", "quantile", "quantile")
    folds = stratified_folds(y, 2, np.random.default_rng(1))
    seen: list[np.ndarray] = []

    def train_fold(fit: np.ndarray, held: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        assert not np.intersect1d(fit, held).size and len(fit) + len(held) == len(y)
        seen.append(held)
        # restart 0 (tree) predicts all zeros, restart 1 is right but trains worse than the
        # wrong restart 2, so the quantile kind is judged by restart 2
        classes = np.stack([np.zeros(len(held), dtype=y.dtype), y[held], 1 - y[held]])
        return np.array([0.5, 0.6, 0.9]), classes

    oof = out_of_fold(y, kinds, folds, train_fold)
    assert len(seen) == 2 and set(oof) == {"tree", "quantile"}
    assert np.array_equal(oof["tree"], np.zeros(len(y))) and np.array_equal(oof["quantile"], 1 - y)


def test_choose_kind_switches_only_on_a_clear_margin() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    right = y.copy()
    noisy = np.where(rng.random(400) < 0.3, 1 - y, y)
    slightly = noisy.copy()  # three rows better, two worse: no clear margin
    wrong, correct = np.flatnonzero(noisy != y), np.flatnonzero(noisy == y)
    slightly[wrong[:3]] = y[wrong[:3]]
    slightly[correct[:2]] = 1 - y[correct[:2]]
    diff, se = paired_margin(y, right, noisy, np.random.default_rng(1))
    assert diff > 0.2 and 0 < se < diff
    assert choose_kind(y, {"tree": noisy, "score": right}, "tree", np.random.default_rng(2)).kind == "score"
    assert choose_kind(y, {"tree": noisy, "score": slightly}, "tree", np.random.default_rng(2)).kind == "tree"
    assert choose_kind(y, {"tree": right, "score": noisy}, "tree", np.random.default_rng(2)).kind == "tree"


def test_fit_cross_fits_small_data_and_not_with_a_held_out_split() -> None:
    pytest.importorskip("torch")
    from models import NeuRulesClassifier

    X, y = toy_frame(240, seed=3)
    clf = NeuRulesClassifier(n_rules=4, epochs=6, n_restarts=4, random_state=0, selection_folds=2).fit(X, y)
    assert clf.kind_scores_ is not None and set(clf.kind_scores_) == set(clf.restart_kinds_)
    assert clf.selected_kind_ in clf.restart_kinds_
    training = clf.restart_scores_["training"]
    assert clf.restart_ == best_within_kinds(clf.restart_kinds_, training)[clf.selected_kind_]
    held = NeuRulesClassifier(n_rules=4, epochs=6, n_restarts=4, random_state=0, validation_fraction=0.2).fit(X, y)
    assert held.selected_kind_ is None and held.kind_choice_ is None
    assert NeuRulesClassifier().selection_folds == 0  # off by default (benchmarks/RESULTS.md)
    plain = NeuRulesClassifier(n_rules=4, epochs=6, n_restarts=4, random_state=0, selection_folds=0).fit(X, y)
    assert plain.selected_kind_ is None and plain.kind_scores_ is None
    assert np.mean(clf.predict(X) == y) >= 0.9


@pytest.mark.parametrize("value", [1, -1, 2.5, "cv", True])
def test_selection_folds_is_checked_with_its_name(value: object) -> None:
    from models import NeuRulesClassifier

    with pytest.raises(ValueError, match="selection_folds"):
        NeuRulesClassifier(selection_folds=value)._validate_params()  # type: ignore[arg-type]


def test_cross_fitting_tells_the_callback_and_can_be_cancelled() -> None:
    """Every fold's epochs reach the callback (as the main fit's last epoch): returning True there cancels. The
    main fit's last epoch itself comes after them, once the list is extracted (`stage` "final")."""
    pytest.importorskip("torch")
    from models import NeuRulesClassifier, TrainingCancelled

    X, y = toy_frame(240, seed=3)
    seen: list[dict] = []
    NeuRulesClassifier(n_rules=4, epochs=6, n_restarts=4, random_state=0, selection_folds=2).fit(X, y, seen.append)
    n = seen[0]["n_epochs"]
    main, folds, final = seen[: n - 1], seen[n - 1 : -1], seen[-1]
    assert [s["epoch"] for s in [*main, final]] == list(range(1, n + 1))
    assert len(folds) >= 2
    assert all(s["epoch"] == n == s["n_epochs"] and s["val_score"] is None and s["stage"] == "crossfit" for s in folds)
    assert all("stage" not in s for s in main) and final["stage"] == "final"

    calls: list[int] = []

    def cancel_in_the_folds(info: dict) -> bool:
        calls.append(info["epoch"])
        return len(calls) > n - 1  # the main fit runs through (its last epoch is told at the end); a fold cancels

    with pytest.raises(TrainingCancelled):
        NeuRulesClassifier(n_rules=4, epochs=6, n_restarts=4, random_state=0, selection_folds=2).fit(
            X, y, cancel_in_the_folds
        )
    assert len(calls) == n
