"""Rows of an evaluation file that its version was trained on (pure): a row whose feature values, as the model
reads them, and label equal a labelled row of the version's training file (`provenance.dataset_id`).

Such rows make an evaluation flatter the version. Comparing SHA-256s finds only the training file itself; a file
cut from it (a subset, the same rows re-ordered or with columns added) has another digest and shares rows. Rows are
compared by a 64-bit hash of those values (Python's `hash`, within one process): two different rows collide with
odds near 2**-64 a pair.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from app.services.csvdata import CSVError, Table, categorical_names, parse_csv
from app.services.evaluation import label_key, served
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
    """A typed cell as a key part: NaN, which equals nothing, reads as missing."""
    return None if isinstance(v, float) and math.isnan(v) else v


def labelled_row_hashes(rule_list: RuleList, table: Table, target: str) -> np.ndarray:
    """Per labelled row, a 64-bit hash of the model's feature values and the label's key (rows without a label
    are left out): 8 bytes a row, where the rows themselves as a set would take hundreds."""
    columns = table_columns(served(rule_list), table, ignore_extra=True)
    labels = [label_key(cell) for cell in table.columns[target]]
    rows = zip(*columns.values(), strict=True) if columns else iter([()] * table.n_rows)
    keys = (hash((*map(_value, row), lab)) for row, lab in zip(rows, labels, strict=True) if lab is not None)
    return np.fromiter(keys, dtype=np.int64)


def unchecked(dataset_id: str | None, reason: str) -> dict[str, Any]:
    """The block when there is no training file to compare with, saying why."""
    return {"training_dataset_id": dataset_id, "rows": None, "training_rows": None, "unchecked_reason": reason}


def training_overlap(
    rule_list: RuleList, table: Table, target: str, training: TrainingFile | NoTrainingFile
) -> dict[str, Any]:
    """The `training_overlap` block: how many of the table's labelled rows are rows of the training file."""
    if isinstance(training, NoTrainingFile):
        return unchecked(training.dataset_id, training.reason)
    try:
        train_table = parse_csv(training.data, keep_text=categorical_names(rule_list))
        if training.target not in train_table.columns:
            return unchecked(training.dataset_id, TRAINING_FILE_UNREADABLE)
        trained = labelled_row_hashes(rule_list, train_table, training.target)
    except (CSVError, RecordError):
        return unchecked(training.dataset_id, TRAINING_FILE_UNREADABLE)
    del train_table  # a large training file: its cells go before the scored file's hashes are made
    rows = int(np.isin(labelled_row_hashes(rule_list, table, target), trained).sum())
    return {
        "training_dataset_id": training.dataset_id,
        "rows": rows,
        "training_rows": int(trained.size),
        "unchecked_reason": None,
    }


__all__ = [
    "NO_TRAINING_FILE",
    "TRAINING_DATASET_DELETED",
    "TRAINING_FILE_TOO_LARGE",
    "TRAINING_FILE_UNREADABLE",
    "NoTrainingFile",
    "TrainingFile",
    "labelled_row_hashes",
    "training_overlap",
    "unchecked",
]
