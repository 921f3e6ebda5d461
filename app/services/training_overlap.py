"""Rows of an evaluation file equal to rows of its version's training file (pure): the same feature values, as
the model reads them, and the same class as a labelled row of the training file (`provenance.dataset_id`).

Comparing SHA-256s finds only the training file itself; a file cut from it (a subset, the same rows re-ordered or
with columns added) has another digest and shares rows, and its figures flatter the version. Rows from the same
source can also be equal by chance where the features take few values: the training file's own repeated rows give
that chance level (a new row equals a training row about as often as a training row equals another one).
Rows are compared by a 64-bit BLAKE2b digest of their values (not Python's `hash`: hash(-1.0) == hash(-2.0)).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

import numpy as np

from app.services.csvdata import Table, categorical_names, parse_csv
from app.services.errors import Invalid
from app.services.evaluation import code_labels, served
from app.services.serving import RecordError, table_columns
from models.rulelist import RuleList

NO_TRAINING_FILE = "no_training_file"  # imported, or trained before provenance named its dataset
TRAINING_DATASET_DELETED = "training_dataset_deleted"
TRAINING_FILE_TOO_LARGE = "training_file_too_large"  # more rows than a request reads (a comparison)
TRAINING_FILE_UNREADABLE = "training_file_unreadable"  # the file no longer reads as the model reads its columns


@dataclass(frozen=True)
class TrainingFile:
    """The version's training file: its dataset id, bytes and label column."""

    dataset_id: str
    data: bytes
    target: str


@dataclass(frozen=True)
class NoTrainingFile:
    """Why a version's evaluations cannot be checked against its training file."""

    dataset_id: str | None
    reason: str


def _value(v: Any) -> Hashable:
    """A typed cell as a key part: NaN (equal to nothing) reads as missing, -0.0 as 0.0 (decided alike)."""
    if isinstance(v, float) and (math.isnan(v) or v == 0.0):
        return None if math.isnan(v) else 0.0
    key: Hashable = v
    return key


def _digest(key: tuple[Hashable, ...]) -> int:
    """A 64-bit digest of a row key (a float's repr round-trips: different values, different text)."""
    return int.from_bytes(blake2b(repr(key).encode(), digest_size=8).digest(), "little", signed=True)


def scored_row_digests(rule_list: RuleList, table: Table, target: str) -> np.ndarray:
    """Per row whose label is one of the model's classes (the rows an evaluation scores), a digest of the model's
    feature values and the class: 8 bytes a row, where the rows themselves as a set would take hundreds."""
    columns = table_columns(served(rule_list), table, ignore_extra=True)
    for f in rule_list.features:
        if f.type == "categorical":  # a level spelled in another Unicode form is that level, as the list reads it
            columns[f.name] = [v if v is None else f.level_key(v) for v in columns[f.name]]
    codes = code_labels(rule_list.classes, table.columns[target]).codes.tolist()
    rows = zip(*columns.values(), strict=True) if columns else iter([()] * table.n_rows)
    keys = ((*map(_value, row), code) for row, code in zip(rows, codes, strict=True) if code >= 0)
    return np.fromiter(map(_digest, keys), dtype=np.int64)


def repeated_rows(digests: np.ndarray) -> int:
    """How many rows equal another row of the same file."""
    _, counts = np.unique(digests, return_counts=True)
    return int(counts[counts > 1].sum())


def unchecked(dataset_id: str | None, reason: str) -> dict[str, Any]:
    """The block when there is no training file to compare with, saying why."""
    return {
        "training_dataset_id": dataset_id,
        "rows": None,
        "scored_rows": None,
        "training_rows": None,
        "training_repeated_rows": None,
        "unchecked_reason": reason,
    }


def training_overlap(
    rule_list: RuleList, table: Table, target: str, training: TrainingFile | NoTrainingFile
) -> dict[str, Any]:
    """The `training_overlap` block: how many of the table's scored rows equal a row of the training file, and the
    training file's own repeated rows (the chance level)."""
    if isinstance(training, NoTrainingFile):
        return unchecked(training.dataset_id, training.reason)
    try:
        train_table = parse_csv(training.data, keep_text=categorical_names(rule_list))
        if training.target not in train_table.columns:
            return unchecked(training.dataset_id, TRAINING_FILE_UNREADABLE)
        trained = scored_row_digests(rule_list, train_table, training.target)
    except (Invalid, RecordError, ValueError):  # CSV, decimal-comma and typing errors of a file read afresh
        return unchecked(training.dataset_id, TRAINING_FILE_UNREADABLE)
    del train_table  # a large training file: its cells go before the scored file's digests are made
    scored = scored_row_digests(rule_list, table, target)
    return {
        "training_dataset_id": training.dataset_id,
        "rows": int(np.isin(scored, trained).sum()),
        "scored_rows": int(scored.size),
        "training_rows": int(trained.size),
        "training_repeated_rows": repeated_rows(trained),
        "unchecked_reason": None,
    }


__all__ = [
    "NO_TRAINING_FILE",
    "TRAINING_DATASET_DELETED",
    "TRAINING_FILE_TOO_LARGE",
    "TRAINING_FILE_UNREADABLE",
    "NoTrainingFile",
    "TrainingFile",
    "repeated_rows",
    "scored_row_digests",
    "training_overlap",
    "unchecked",
]
