"""Check training options against the learner's own rules before a job is queued.

The request schema (`app.schemas.training`) already refused unknown, reserved and mistyped options; what
is left are rules across options (`min_support <= max_support`, ...) that only the learner knows.
"""

from __future__ import annotations

from typing import Any


def check_options(n_rules: int, epochs: int | str, random_state: int, options: dict[str, Any]) -> str | None:
    """None when the learner accepts the options, else its message.

    Imports `models.estimator` (numpy + pandas; torch is imported only inside fit), and only when
    options are given, so the prediction path of the API process stays free of pandas.
    """
    if not options:
        return None
    from models.estimator import NeuRulesClassifier

    try:
        clf = NeuRulesClassifier(n_rules=n_rules, epochs=epochs, random_state=random_state, **options)
        validate = getattr(clf, "_validate_params", None)
        if validate is not None:
            validate()
    except (ValueError, TypeError) as e:
        return str(e)
    return None
