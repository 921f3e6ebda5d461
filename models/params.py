"""Checks of the estimator's constructor parameters (clear ValueErrors naming the parameter)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from models.crisp import MAX_EPS


def _positive_int(params: Mapping[str, Any], name: str, allow: tuple[Any, ...] = ()) -> None:
    value = params[name]
    if value in allow and isinstance(value, str | type(None)):
        return
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
        extra = "".join(f" or {a!r}" for a in allow)
        raise ValueError(f"{name} must be a positive int{extra}, got {value!r}")


def _fraction(params: Mapping[str, Any], name: str, high: float) -> None:
    value = params[name]
    if not isinstance(value, int | float | np.number) or not 0 <= value < high:
        raise ValueError(f"{name} must be a number in [0, {high}), got {value!r}")


def _is_real(value: Any) -> bool:
    """A finite real number (not a bool, not NaN or infinite): comparisons with NaN are all False, so a
    check written as `value < 0` let NaN through, and a string or None failed with a bare TypeError."""
    if not isinstance(value, int | float | np.integer | np.floating) or isinstance(value, bool | np.bool_):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond the float range
        return False


def _real(params: Mapping[str, Any], name: str, low: float, high: float, *, open_low: bool = False) -> None:
    """ValueError unless the parameter is a finite number in [low, high] ((low, high] when `open_low`)."""
    value = params[name]
    inside = _is_real(value) and (low < value if open_low else low <= value) and value <= high
    if not inside:
        interval = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise ValueError(f"{name} must be a finite number in {interval}, got {value!r}")


def _temperatures(params: Mapping[str, Any], name: str) -> None:
    t = params[name]
    if not isinstance(t, tuple | list) or len(t) != 2 or not all(_is_real(v) and v > 0 for v in t):
        raise ValueError(f"{name} must be a (start, end) pair of positive finite temperatures, got {t!r}")


def _selection_folds(value: Any) -> None:
    if value == "auto" and isinstance(value, str):
        return
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 0 or value == 1:
        raise ValueError(f"selection_folds must be 'auto', 0 (no cross-fitting) or an int >= 2, got {value!r}")


def check_params(params: Mapping[str, Any]) -> None:
    """Raise ValueError naming the first invalid parameter."""
    for name in ("n_rules", "batch_size", "max_restarts", "target_steps", "min_epochs", "max_epochs", "max_conditions"):
        _positive_int(params, name)
    _positive_int(params, "epochs", ("auto",))
    _positive_int(params, "n_restarts", ("auto",))
    _positive_int(params, "max_candidates", (None,))
    _selection_folds(params["selection_folds"])
    for name, low in (("random_state", 0), ("n_threads", 0)):
        value = params[name]
        if value is not None and (not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low):
            raise ValueError(f"{name} must be None or an int >= {low}, got {value!r}")
    _real(params, "lr", 0.0, math.inf, open_low=True)
    _real(params, "min_support", 0.0, 1.0)
    _real(params, "max_support", 0.0, 1.0)
    if not params["min_support"] <= params["max_support"]:
        raise ValueError("need 0 <= min_support <= max_support <= 1")
    _real(params, "lambda_support", 0.0, math.inf)
    _temperatures(params, "t_pi")
    _temperatures(params, "t_rl")
    _real(params, "eps", 0.0, MAX_EPS, open_low=True)  # a blocked rule must stay below the default rule
    _real(params, "smoothing", 0.0, math.inf)
    _real(params, "free_weight", 0.0, 1.0, open_low=True)
    _fraction(params, "tune_fraction", 10.0)
    _fraction(params, "refit_fraction", 10.0)
    _fraction(params, "validation_fraction", 0.9)
