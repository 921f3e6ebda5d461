"""scikit-learn's estimator checks on NeuRulesClassifier (small settings).

No check is waived (EXPECTED_FAILED is empty): all generated checks pass with scikit-learn 1.9.
Checks that need `sample_weight` are not generated because `fit` takes none (the paper's
objective is unweighted). The estimator implements get_params/set_params/__sklearn_tags__ itself
instead of inheriting from BaseEstimator (so `models` imports without scikit-learn); the
collection-time "does not inherit from BaseEstimator" UserWarning is expected.
"""

from __future__ import annotations

import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

from sklearn.utils.estimator_checks import parametrize_with_checks

from models import NeuRulesClassifier

EXPECTED_FAILED: dict[str, str] = {}


def _expected_failed(estimator: object) -> dict[str, str]:
    return EXPECTED_FAILED


@parametrize_with_checks(
    [NeuRulesClassifier(n_rules=4, target_steps=150, min_epochs=5, n_restarts=2, random_state=0)],
    expected_failed_checks=_expected_failed,
)
def test_sklearn_compatible(estimator: NeuRulesClassifier, check) -> None:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=FutureWarning)
        check(estimator)
