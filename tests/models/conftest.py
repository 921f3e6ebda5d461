"""Shared fixtures for the learner tests."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from tests.conftest import DATASETS


def _load(name: str) -> tuple[pd.DataFrame, pd.Series]:
    d = DATASETS
    for suffix in (".csv", ".csv.gz"):
        p = d / f"{name}{suffix}"
        if p.exists():
            df = pd.read_csv(p)
            return df.iloc[:, :-1], df.iloc[:, -1]
    if os.environ.get("CI"):  # in CI the shared datasets sit beside the clone: absence is a failure
        pytest.fail(f"dataset {name} not found in {d}")
    pytest.skip(f"dataset {name} not found in {d}")
    raise AssertionError  # unreachable


@pytest.fixture
def load_dataset() -> Callable[[str], tuple[pd.DataFrame, pd.Series]]:
    """Loader of a shared dataset by name ((features, target)); skips when it is absent."""
    return _load


def toy_frame(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """A small mixed-type table whose label is a two-condition rule (age > 50 and city != oslo)."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.uniform(20, 80, n).round(),
            "income": rng.lognormal(10, 1, n),
            "city": rng.choice(["paris", "rome", "oslo"], n),
        }
    )
    y = np.where((df["age"] > 50) & (df["city"] != "oslo"), 1, 0)
    return df, y
