"""Check training options against the learner's own rules before a job is queued.

The request schema (`app.schemas.training`) already refused unknown, reserved and mistyped options; what
is left are rules across options (`min_support <= max_support`, ...) that only the learner knows.
"""

from __future__ import annotations

import math
from typing import Any

# the options that decide how many epochs `epochs="auto"` plans (models.budget.plan_budget)
EPOCH_PLANNING = frozenset({"max_epochs", "target_steps", "tune_fraction", "refit_fraction", "validation_fraction"})


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


def most_auto_epochs(options: dict[str, Any]) -> int | None:
    """The most epochs `epochs="auto"` can plan with these options, when they change that plan (else None).

    The annealed stage runs at most `max_epochs`; fine-tuning and refit run `target_steps * fraction` steps,
    which is as many epochs when the training rows fit one batch (`models.budget.plan_budget`); the refit
    runs only when rows are held out (`validation_fraction` > 0).
    """
    if not EPOCH_PLANNING & set(options):
        return None
    from models.estimator import NeuRulesClassifier

    clf = NeuRulesClassifier(**options)  # the learner's defaults for the options not sent
    steps = clf.target_steps
    refit = math.ceil(steps * clf.refit_fraction) if clf.validation_fraction > 0 else 0
    return int(clf.max_epochs + math.ceil(steps * clf.tune_fraction) + refit)
