"""Check training options against the learner's own parameter list before a job is queued."""

from __future__ import annotations

from typing import Any

RESERVED = {"n_rules", "epochs", "random_state", "device", "verbose"}


def check_options(n_rules: int, epochs: int | str, random_state: int, options: dict[str, Any]) -> str | None:
    """None when the learner accepts the options, else a message naming the problem.

    Imports `models.estimator` (numpy + pandas; torch is imported only inside fit), and only when
    options are given, so the prediction path of the API process stays free of pandas.
    """
    if not options:
        return None
    reserved = sorted(RESERVED & set(options))
    if reserved:
        return (
            f"{', '.join(reserved)} cannot be set in options (use the top-level parameter; the worker picks the device)"
        )
    from models.estimator import NeuRulesClassifier

    known = [n for n in NeuRulesClassifier._get_param_names() if n not in RESERVED]  # noqa: SLF001
    unknown = sorted(set(options) - set(known))
    if unknown:
        return f"unknown option(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
    try:
        clf = NeuRulesClassifier(n_rules=n_rules, epochs=epochs, random_state=random_state, **options)
        validate = getattr(clf, "_validate_params", None)
        if validate is not None:
            validate()
    except (ValueError, TypeError) as e:
        return str(e)
    return None
