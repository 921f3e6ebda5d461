"""The `validate` stage of fit: inputs and targets checked with scikit-learn's messages."""

from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from models.encoding import as_array, to_frame
from models.rulelist import ClassLabel, is_missing, json_label


@dataclass(frozen=True)
class TrainingData:
    """Validated training data: the frame, the classes and each row's class index."""

    frame: pd.DataFrame
    classes: np.ndarray
    y: np.ndarray  # class index per row
    labels: list[ClassLabel]  # the classes as the document writes them

    @property
    def label_per_row(self) -> np.ndarray:
        """Each row's class as the document writes it."""
        out = np.empty(len(self.labels), dtype=object)
        out[:] = self.labels
        return np.asarray(out[self.y])


def _data_conversion_warning() -> type[Warning]:
    try:
        from sklearn.exceptions import DataConversionWarning
    except ImportError:  # scikit-learn is optional
        return UserWarning
    category: type[Warning] = DataConversionWarning
    return category


def check_targets(y: Any) -> np.ndarray:
    """Validate a classification target; returns a 1-D array."""
    if y is None:
        raise ValueError("requires y to be passed, but the target y is None")
    arr = np.asarray(y)
    if arr.ndim == 2 and arr.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the shape of y "
            "to (n_samples, ), for example using ravel().",
            _data_conversion_warning(),
            stacklevel=3,
        )
        arr = arr.ravel()
    if arr.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {arr.shape} instead.")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError("Input y contains NaN or infinity.")
        if not np.all(arr == np.round(arr)):
            raise ValueError("Unknown label type: continuous. Only classification targets are supported.")
    if arr.dtype.kind == "O" and any(is_missing(v) for v in arr):
        raise ValueError("Input y contains NaN or None.")
    if arr.dtype.kind == "O" and len({isinstance(v, str) for v in arr}) > 1:
        raise ValueError("Mix of label input types (string and number): give y labels of one type.")
    return arr


def document_labels(classes: np.ndarray) -> list[ClassLabel]:
    """The classes as JSON scalars, as strings when two would collide."""
    labels = [json_label(c) for c in classes]
    if len(set(map(repr, labels))) != len(labels):
        return [str(c) for c in classes]
    return labels


def training_data(frame: pd.DataFrame, y: Any) -> TrainingData:
    """Check a training frame against its target."""
    y_arr = check_targets(y)
    if frame.shape[1] == 0:
        raise ValueError(f"0 feature(s) (shape=({frame.shape[0]}, 0)) while a minimum of 1 is required.")
    if len(frame) == 0:
        raise ValueError(f"0 sample(s) (shape=(0, {frame.shape[1]})) while a minimum of 1 is required.")
    if len(y_arr) != len(frame):
        raise ValueError(f"Found input variables with inconsistent numbers of samples: [{len(frame)}, {len(y_arr)}]")
    classes, y_idx = np.unique(y_arr, return_inverse=True)
    if len(classes) < 2:
        raise ValueError("Classifier can't train when only one class is present.")
    return TrainingData(frame, classes, y_idx.astype(np.int64), document_labels(classes))


def _reject_sparse(X: Any) -> None:
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise TypeError("Sparse data is not supported: pass a dense array or a DataFrame.")


def _string_names(X: pd.DataFrame) -> bool:
    return all(isinstance(c, str) for c in X.columns)


def fit_frame(X: Any) -> pd.DataFrame:
    """Training input as a DataFrame (arrays and non-string column names get x0, x1, ...)."""
    _reject_sparse(X)
    if isinstance(X, pd.DataFrame):
        if len(X.columns) and not _string_names(X):
            X = X.copy()
            X.columns = [f"x{i}" for i in range(X.shape[1])]
    else:
        X = to_frame(X)
    _check_names(list(X.columns))
    return X


def _check_names(names: list[str]) -> None:
    """Every column needs its own non-blank name: the rule-list document refers to features by name."""
    for i, name in enumerate(names):
        if not str(name).strip():
            raise ValueError(f"column {i} has a blank name {name!r}: give every feature column a name")
    duplicated = sorted(str(n) for n, count in Counter(names).items() if count > 1)
    if duplicated:
        raise ValueError(f"duplicate column name(s) {duplicated}: give every feature column its own name")


def predict_frame(X: Any, names: list[str], names_in: list[str] | None, estimator: str) -> pd.DataFrame:
    """Input at predict time as a DataFrame with the training column names; checks names and width
    as scikit-learn does. names_in: the column names fit saw in a DataFrame, else None."""
    _reject_sparse(X)
    if isinstance(X, pd.DataFrame):
        if names_in is not None:
            if not _string_names(X) or list(X.columns) != names_in:
                raise ValueError(
                    "The feature names should match those that were passed during fit. "
                    f"Expected {names_in}, got {list(X.columns)}."
                )
            return X
        if _string_names(X) and len(X.columns):
            warnings.warn(f"X has feature names, but {estimator} was fitted without feature names", stacklevel=3)
        X = X.copy()
        X.columns = [f"x{i}" for i in range(X.shape[1])]
        _check_width(X.shape[1], len(names), estimator)
        return X
    if isinstance(X, (dict, list)) and X and (isinstance(X, dict) or isinstance(X[0], dict)):
        return to_frame(X)
    arr = as_array(X)
    if arr.ndim != 2:
        to_frame(arr)  # raises the informative error
    if names_in is not None:
        warnings.warn(
            f"X does not have valid feature names, but {estimator} was fitted with feature names", stacklevel=3
        )
    _check_width(arr.shape[1], len(names), estimator)
    return to_frame(arr, list(names))


def _check_width(got: int, expected: int, estimator: str) -> None:
    if got != expected:
        raise ValueError(f"X has {got} features, but {estimator} is expecting {expected} features as input.")
