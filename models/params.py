"""Checks of the estimator's constructor parameters (clear ValueErrors naming the parameter)."""

from __future__ import annotations

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


def _temperatures(params: Mapping[str, Any], name: str) -> None:
    t = params[name]
    if not isinstance(t, tuple | list) or len(t) != 2 or min(t) <= 0:
        raise ValueError(f"{name} must be a (start, end) pair of positive temperatures, got {t!r}")


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
    if not params["lr"] > 0:
        raise ValueError(f"lr must be > 0, got {params['lr']!r}")
    if not 0 <= params["min_support"] <= params["max_support"] <= 1:
        raise ValueError("need 0 <= min_support <= max_support <= 1")
    if params["lambda_support"] < 0:
        raise ValueError("lambda_support must be >= 0")
    _temperatures(params, "t_pi")
    _temperatures(params, "t_rl")
    if not 0 < params["eps"] <= MAX_EPS:
        raise ValueError(f"eps must be in (0, {MAX_EPS}] (a blocked rule must stay below the default rule)")
    if params["smoothing"] < 0:
        raise ValueError("smoothing must be >= 0")
    if not 0 < params["free_weight"] <= 1:
        raise ValueError("free_weight must be in (0, 1]")
    _fraction(params, "tune_fraction", 10.0)
    _fraction(params, "refit_fraction", 10.0)
    _fraction(params, "validation_fraction", 0.9)
