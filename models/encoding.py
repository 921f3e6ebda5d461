"""Tabular input -> float matrix for the network, and back to the original units.

Semantics (documented in the rule-list format):
- numeric columns: missing (None, NaN of any float type, pandas' NA / NaT, "") -> training median
  (`fill_value`), then standardised robustly: (x - median) / (IQR / 1.349), or (x - mean) / std
  where the IQR is 0; a column that is constant after filling gives no network input (no rule can
  condition on it); a column with exactly two values lists them (`values`), so that its conditions read `x = 1`;
- categorical columns (strings, booleans, pandas categoricals, anything non-numeric): one 0/1
  input per level seen in training, compared as `category_key` values; missing is its own level
  (key None); an unseen category at predict time is all-zero (it is in no `in` set and in every
  `not_in` set); a column with a single level gives no network input.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from models.rulelist import Feature, category_key_column, is_missing


@dataclass(frozen=True)
class Unit:
    """One network input column: a standardised numeric feature or one category level."""

    feature: int
    kind: str  # "numeric" | "onehot"
    level: str | None = None


# standardised values are clipped here: float32 (the network's type) holds them with room for its arithmetic, and
# a bound learned in the bulk of a column compares alike with a clipped value and with the value itself
Z_LIMIT = 1e30


@dataclass
class ColumnSpec:
    """Training-time description of one input column."""

    name: str
    kind: str  # "numeric" | "categorical"
    fill_value: float = 0.0
    mean: float = 0.0
    scale: float = 1.0
    min: float | None = None
    max: float | None = None
    constant: bool = False
    levels: list[str | None] = field(default_factory=list)
    values: tuple[float, ...] = ()  # numeric: the two training values of a two-valued column

    def standardised(self, x: np.ndarray | float) -> np.ndarray:
        """Numeric values on the network's scale, `(x - mean) / scale`, within +-Z_LIMIT: +-1e300 beside values
        near 1e-300 (an IQR near 1e-300) overflowed to +-inf, and inf - inf made every restart NaN."""
        with np.errstate(over="ignore"):
            z = (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        return np.clip(z, -Z_LIMIT, Z_LIMIT)

    def to_feature(self) -> Feature:
        """The document's `features` entry for this column."""
        if self.kind == "numeric":
            return Feature(
                name=self.name,
                type="numeric",
                fill_value=float(self.fill_value),
                min=self.min,
                max=self.max,
                values=self.values,
            )
        return Feature(name=self.name, type="categorical", categories=tuple(self.levels))

    def to_feature_dict(self) -> dict[str, Any]:
        """The document's `features` entry for this column, as JSON."""
        return self.to_feature().to_dict()


def default_feature_names(n: int) -> list[str]:
    """Names given to the columns of an array without names."""
    return [f"x{i}" for i in range(n)]


def as_array(X: Any) -> np.ndarray:
    """X as a numpy array; rows given as lists that mix numbers and text keep each value's type
    (numpy would turn every value into text, and the numeric columns into categories)."""
    arr = np.asarray(X)
    if arr.dtype.kind in "US" and not isinstance(X, np.ndarray):
        arr = np.asarray(X, dtype=object)
    return arr


def to_frame(X: Any, feature_names: list[str] | None = None) -> pd.DataFrame:
    """Turn a DataFrame, 2-D array, dict of columns or list of records into a DataFrame."""
    if isinstance(X, pd.DataFrame):
        return X
    if isinstance(X, dict) or (isinstance(X, list) and X and isinstance(X[0], dict)):
        return pd.DataFrame(X)
    arr = as_array(X)
    if arr.ndim == 1:
        raise ValueError(
            "Expected 2D array, got 1D array instead. Reshape your data either using "
            "array.reshape(-1, 1) if your data has a single feature or array.reshape(1, -1) "
            "if it contains a single sample."
        )
    if arr.ndim != 2:
        raise ValueError(f"Expected 2D array, got an array of shape {arr.shape}")
    names = feature_names if feature_names is not None else default_feature_names(arr.shape[1])
    if len(names) != arr.shape[1]:
        raise ValueError(f"X has {arr.shape[1]} features, but the model expects {len(names)}")
    return pd.DataFrame({n: arr[:, i] for i, n in enumerate(names)})


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _is_missing(v: Any) -> bool:
    return is_missing(v) or (isinstance(v, str) and v == "")


def is_numeric_column(col: pd.Series) -> bool:
    """True for numeric dtypes and object columns holding only numbers / missing values."""
    if pd.api.types.is_bool_dtype(col.dtype):
        return False
    if pd.api.types.is_datetime64_any_dtype(col.dtype) or pd.api.types.is_timedelta64_dtype(col.dtype):
        raise ValueError(
            f"feature {col.name!r} holds dates or durations ({col.dtype}): convert it to numbers "
            "(e.g. days since a reference date) or to text categories"
        )
    if isinstance(col.dtype, pd.CategoricalDtype):
        return False
    if pd.api.types.is_numeric_dtype(col.dtype):
        if pd.api.types.is_complex_dtype(col.dtype):
            raise ValueError(f"Complex data not supported (feature {col.name!r})")
        return True
    values = col.to_numpy(dtype=object)
    seen = False
    for v in values:
        if _is_missing(v):
            continue
        if isinstance(v, (complex, np.complexfloating)):
            raise ValueError(f"Complex data not supported (feature {col.name!r})")
        if not _is_number(v):
            return False
        seen = True
    return seen


def _float(name: Any, v: Any) -> float:
    try:
        return float(v)
    except OverflowError:  # a whole number beyond the float range (10**400)
        raise ValueError(f"Input column {name!r} holds a number too large for dtype('float64').") from None


def numeric_values(col: pd.Series) -> np.ndarray:
    """Column as float64 with NaN for missing; raises on infinite values."""
    if pd.api.types.is_numeric_dtype(col.dtype) and not pd.api.types.is_bool_dtype(col.dtype):
        out = col.to_numpy(dtype=np.float64, na_value=np.nan)
    else:
        values = [np.nan if _is_missing(v) else _float(col.name, v) for v in col.to_numpy(dtype=object)]
        out = np.array(values, dtype=np.float64)
    infinite = np.flatnonzero(np.isinf(out))
    if infinite.size:
        more = f", and {infinite.size - 1} more" if infinite.size > 1 else ""
        raise ValueError(
            f"Input column {col.name!r} contains infinity or a value too large for dtype('float64') "
            f"(row {int(infinite[0])}, counting from 0{more})."
        )
    return np.asarray(out, dtype=np.float64)


def category_keys(col: pd.Series) -> np.ndarray:
    """Column as an object array of category keys (None = missing), each value keyed by the code the rule
    list evaluates with (pandas' factorize merged True with 1, whose keys differ)."""
    return category_key_column(col.to_numpy(dtype=object))


def _median(x: np.ndarray) -> float:
    """The median, also of values near the float limit (the mean of the two middle values
    1.7e308 and 1.6e308 overflows: then the median of the halves, doubled)."""
    with np.errstate(over="ignore", invalid="ignore"):
        m = float(np.median(x))
        return m if math.isfinite(m) else float(np.median(x / 2.0)) * 2.0


def _mean_std(x: np.ndarray) -> tuple[float, float]:
    """Mean and std, right also for values near the float limits (computed on x / max|x| where the
    squares overflow, near 1e308, or underflow to a std of 0, near 1e-300)."""
    if not len(x):
        return 0.0, 0.0
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        mean, std = float(x.mean()), float(x.std())
        if math.isfinite(mean) and math.isfinite(std) and (std > 0 or x.min() == x.max()):
            return mean, std
        m = float(np.max(np.abs(x)))
        return float((x / m).mean()) * m, float((x / m).std()) * m


class TabularEncoder:
    """Fit on a training DataFrame; transform any DataFrame with the same columns."""

    def __init__(self, robust_scale: bool = True) -> None:
        self.robust_scale = robust_scale
        self.columns: list[ColumnSpec] = []
        self.units: list[Unit] = []

    def fit(self, df: pd.DataFrame) -> TabularEncoder:
        """Learn column kinds, fill values, scaling and category levels."""
        self.columns = []
        self.units = []
        robust_scale = self.robust_scale
        for j, name in enumerate(df.columns):
            col = df[name]
            if is_numeric_column(col):
                x = numeric_values(col)
                ok = ~np.isnan(x)
                fill = _median(x[ok]) if ok.any() else 0.0
                xf = np.where(ok, x, fill)
                mean, std = _mean_std(xf)
                constant = not (std > 0 and np.isfinite(std)) or float(xf.min()) == float(xf.max())
                if not constant and robust_scale:
                    # robust standardisation: median and IQR (scaled to the std of a normal), so
                    # a few extreme values do not squeeze the bulk of the data into a sliver that
                    # a fixed predicate temperature cannot resolve; the std where the IQR is 0
                    # (or beyond the float range: values near +-1.8e308)
                    with np.errstate(over="ignore", invalid="ignore"):
                        q1, med, q3 = np.quantile(xf, [0.25, 0.5, 0.75])
                        iqr = q3 - q1
                    if q3 > q1 and np.isfinite(iqr) and np.isfinite(med):
                        mean, std = float(med), float(iqr / 1.349)
                distinct = np.unique(xf)
                spec = ColumnSpec(
                    name=str(name),
                    kind="numeric",
                    fill_value=fill,
                    mean=mean,
                    scale=std if not constant else 1.0,
                    min=float(xf.min()) if len(xf) else None,
                    max=float(xf.max()) if len(xf) else None,
                    constant=constant,
                    values=tuple(float(v) for v in distinct) if len(distinct) == 2 else (),
                )
                if not constant:
                    self.units.append(Unit(j, "numeric"))
            else:
                keys = category_keys(col)
                present = {k for k in keys if k is not None}
                levels: list[str | None] = sorted(present)
                if any(k is None for k in keys):
                    levels.append(None)
                spec = ColumnSpec(
                    name=str(name),
                    kind="categorical",
                    levels=levels,
                    constant=len(levels) < 2,
                )
                if len(levels) >= 2:
                    self.units.extend(Unit(j, "onehot", lv) for lv in levels)
            self.columns.append(spec)
        return self

    @property
    def n_units(self) -> int:
        """Number of network inputs."""
        return len(self.units)

    def raw_columns(self, df: pd.DataFrame) -> list[np.ndarray]:
        """Per column: filled float64 values (numeric) or category keys (categorical)."""
        out: list[np.ndarray] = []
        for spec in self.columns:
            if spec.name not in df.columns:
                raise ValueError(f"missing feature {spec.name!r}")
            col = df[spec.name]
            if spec.kind == "numeric":
                if not is_numeric_column(col) and not all(_is_missing(v) for v in col.to_numpy(dtype=object)):
                    # only missing values ("" too) is a column of fills, whatever else the batch holds
                    raise ValueError(f"feature {spec.name!r} must be numeric")
                x = numeric_values(col)
                out.append(np.where(np.isnan(x), spec.fill_value, x))
            else:  # a value spelling a level in another Unicode form is that level, as the list reads it
                out.append(spec.to_feature().level_keys(category_keys(col)))
        return out

    def transform(self, df: pd.DataFrame, raw: list[np.ndarray] | None = None) -> np.ndarray:
        """Encoded float64 matrix of shape (n_rows, n_units)."""
        raw = raw if raw is not None else self.raw_columns(df)
        n = len(df)
        Z = np.zeros((n, len(self.units)), dtype=np.float64)
        codes: dict[int, np.ndarray] = {}
        for u, unit in enumerate(self.units):
            spec = self.columns[unit.feature]
            col = raw[unit.feature]
            if unit.kind == "numeric":
                Z[:, u] = spec.standardised(col)
            else:
                if unit.feature not in codes:
                    index = {lv: i for i, lv in enumerate(spec.levels)}
                    codes[unit.feature] = np.fromiter((index.get(k, -1) for k in col), dtype=np.int64, count=n)
                Z[:, u] = codes[unit.feature] == spec.levels.index(unit.level)
        return Z

    def features(self) -> list[Feature]:
        """The document's `features` list."""
        return [c.to_feature() for c in self.columns]

    def feature_dicts(self) -> list[dict[str, Any]]:
        """The document's `features` list, as JSON."""
        return [c.to_feature_dict() for c in self.columns]
