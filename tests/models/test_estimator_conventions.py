"""scikit-learn conventions and parameter checks of NeuRulesClassifier (found by a library probe)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

from models import NeuRulesClassifier


@pytest.fixture(scope="module")
def fitted() -> tuple[NeuRulesClassifier, pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=200)})
    y = (X["a"] > 0).astype(int).to_numpy()
    return NeuRulesClassifier(n_rules=3, epochs=5, random_state=0).fit(X, y), X, y


def test_score_takes_a_column_vector_and_weights(fitted: Any) -> None:
    """An (n, 1) y broadcast against (n,) predictions to an n x n comparison: 0.50 for a 0.995 model."""
    m, X, y = fitted
    accuracy = float(np.mean(m.predict(X) == y))
    assert m.score(X, y.reshape(-1, 1)) == m.score(X, y) == accuracy
    weights = np.where(m.predict(X) == y, 1.0, 0.0)
    assert m.score(X, y, sample_weight=weights) == 1.0


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("smoothing", math.nan),
        ("smoothing", math.inf),
        ("smoothing", None),
        ("lambda_support", math.nan),
        ("lambda_support", "0.4"),
        ("lr", math.inf),
        ("lr", "0.1"),
        ("eps", math.nan),
        ("free_weight", None),
        ("min_support", math.nan),
        ("t_pi", (0.1, math.inf)),
        ("t_pi", (math.nan, 0.1)),
        ("t_rl", ("a", "b")),
    ],
)
def test_a_parameter_that_is_not_a_finite_number_is_named_before_training(name: str, value: Any) -> None:
    """NaN passed every `value < 0` check (smoothing=nan made every probability NaN); a string or None was a
    bare TypeError."""
    X = pd.DataFrame({"a": np.arange(20.0)})
    with pytest.raises(ValueError, match=name):
        NeuRulesClassifier(epochs=1, **{name: value}).fit(X, np.arange(20) % 2)


def test_blank_numeric_cells_are_missing_whatever_the_batch_holds(fitted: Any) -> None:
    """`""` alone was refused ("must be numeric") while beside a number it was read as missing."""
    m, _, _ = fitted
    both = m.predict(pd.DataFrame({"a": ["", 0.5]}))
    assert m.predict(pd.DataFrame({"a": [""]})).tolist() == both[:1].tolist()
    assert m.predict(pd.DataFrame({"a": ["", None]})).tolist() == [both[0]] * 2


def test_a_refit_without_inputs_keeps_nothing_of_the_earlier_fit() -> None:
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"a": rng.normal(size=100)})
    y = (X["a"] > 0).astype(int).to_numpy()
    m = NeuRulesClassifier(n_rules=2, epochs=3, random_state=0).fit(X, y)
    assert hasattr(m, "restart_")
    m.fit(pd.DataFrame({"c": np.ones(100)}), y)
    assert not hasattr(m, "restart_") and not hasattr(m, "budget_") and m.rule_list_.rules == ()
