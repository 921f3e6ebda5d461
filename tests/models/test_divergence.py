"""Training whose every restart diverges (its parameters NaN) fails with a reason, not an empty rule list."""

from __future__ import annotations

import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from models.estimator import NeuRulesClassifier
from models.training import Progress, TrainingDiverged
from tests.models.conftest import toy_frame


@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"lr": 1e308}, "after epoch 3 of 3 (last mean loss nan)"),
        ({"lr": 1e39}, "after epoch 3 of 3 (last mean loss nan)"),
        ({"t_pi": (1.0, 1e-320)}, "after epoch 3 of 3"),  # 0 in float32: a division by zero
    ],
)
def test_a_diverging_fit_raises_instead_of_keeping_the_default_rule(options: dict[str, Any], where: str) -> None:
    """These fits printed loss=nan and "succeeded" with only the default rule."""
    X, y = toy_frame(200)
    clf = NeuRulesClassifier(epochs=3, n_restarts=1, random_state=0, **options)
    with pytest.raises(ValueError, match="training diverged") as caught:
        clf.fit(X, y)
    assert where in str(caught.value) and "smaller learning rate (lr)" in str(caught.value)
    assert isinstance(caught.value, TrainingDiverged) and not hasattr(clf, "rule_list_")


def test_divergence_in_the_last_step_is_caught_by_the_parameters() -> None:
    """One epoch of lr 1e308: its loss is finite (read before the update), the parameters after it are NaN."""
    X, y = toy_frame(200)
    seen: list[float] = []
    clf = NeuRulesClassifier(epochs=1, n_restarts=1, random_state=0, lr=1e308)
    with pytest.raises(TrainingDiverged, match="parameters are NaN after epoch 1 of 1"):  # its loss was finite
        clf.fit(X, y, callback=lambda p: seen.append(p["loss"]))
    assert seen and all(math.isfinite(v) for v in seen)


def test_a_non_finite_epoch_loss_is_reported_as_it_is() -> None:
    """The restarts train as one batch: one restart gone NaN makes the mean loss NaN while the others train on."""
    calls: list[dict[str, Any]] = []
    progress = Progress(5, callback=calls.append)
    progress.epoch_done(0.5, None)  # type: ignore[arg-type]  # the network is only used for a val_score
    progress.epoch_done(math.inf, None)  # type: ignore[arg-type]
    assert [c["epoch"] for c in calls] == [1, 2] and progress.last_loss == math.inf


def test_the_service_reports_divergence_as_the_jobs_reason() -> None:
    """The worker turns the learner's ValueError into a reason for the user (not "internal error")."""
    training = pytest.importorskip("worker.training")
    X, y = toy_frame(200)
    data = X.assign(target=y).to_csv(index=False).encode()
    with pytest.raises(training.TrainingInputError, match="training diverged: every restart's parameters are NaN"):
        training.train_rule_list(data, "target", {"epochs": 3, "options": {"n_restarts": 1, "lr": 1e308}})
