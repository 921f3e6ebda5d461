"""Evaluation schemas: a model version scored on a labelled dataset (docs/governance-api.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.schemas.predictions import ModelRef
from app.services.job_states import JobState

Label = int | str | bool


class EvaluationCreate(BaseModel):
    """Score a version on one of the tenant's datasets."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"dataset_id": "ds_4f1c2a9e0b7d6c5a3e2f1a0b", "slice_by": "sex"}]},
    )

    dataset_id: str = Field(max_length=40, description="a dataset the tenant uploaded, with the target column")
    target: str | None = Field(
        None, min_length=1, max_length=300, description="the label column (default: the model's training target)"
    )
    slice_by: str | None = Field(
        None, min_length=1, max_length=300, description="a column: the same metrics per group of it"
    )


class PerClassMetrics(BaseModel):
    """Precision, recall, F1 and support of one class (0 where a denominator is 0)."""

    model_config = ConfigDict(populate_by_name=True)

    class_: Label = Field(alias="class")
    precision: float
    recall: float
    f1: float
    support: int


class MetricsBlock(BaseModel):
    """Classification metrics on the scored rows (as scikit-learn defines them)."""

    accuracy: float | None
    f1_weighted: float | None
    f1_macro: float | None
    per_class: list[PerClassMetrics]
    roc_auc: float | None = Field(description="binary targets, both classes present; else null")
    brier: float | None = Field(description="binary targets: mean squared error of P(classes[1]); else null")


class LabelMatrix(BaseModel):
    """A square count table with its labels (confusion matrix: rows = true class)."""

    labels: list[Label]
    matrix: list[list[int]]


class CalibrationBin(BaseModel):
    """One reliability bin [lower, upper)."""

    lower: float
    upper: float
    mean_predicted: float
    observed_rate: float
    count: int


class Calibration(BaseModel):
    """Reliability bins: binary, P(positive_class) vs its rate; multi-class, top probability vs accuracy."""

    positive_class: Label | None
    bins: list[CalibrationBin]


class RuleEvaluation(BaseModel):
    """One rule (list order, then the default rule, id 0) on the scored rows."""

    rule_id: int
    rule_text: str
    prediction: Label
    n: int = Field(description="scored rows this rule decided")
    share: float
    accuracy: float | None = Field(description="null where n is 0")
    class_counts: dict[str, int] = Field(description="true classes of the rows it decided")
    training_support: int
    training_share: float | None


class Excluded(BaseModel):
    """Rows left out of the metrics, counted (never dropped silently)."""

    missing_target: int
    unseen_class: int
    unseen_class_values: dict[str, int] = Field(description="the 50 most frequent, as the file writes them")


class SliceGroup(BaseModel):
    """The metrics of one group of the slice column."""

    value: str | None
    pooled: bool = Field(
        default=False,
        description='true for the group that pools the values beyond the 49 largest (its value reads "(other)"); '
        'a column value that happens to read "(other)" has a group of its own, with pooled false',
    )
    n_rows: int
    metrics: MetricsBlock
    positive_rate: float | None


class Slices(BaseModel):
    """Per group of `slice_by` (largest first; at most 50, the rest pooled as "(other)")."""

    column: str
    groups: list[SliceGroup]


class TrainingOverlap(BaseModel):
    """How many scored rows equal a row of the version's training file (`provenance.dataset_id`, the file its job
    trained and held out from): the same feature values as the model reads them and the same class. Far more of
    them than the share `training_repeated_rows / training_rows` of `scored_rows` (the chance level) say the file
    was cut from the training file, whose SHA-256 differs: figures on those rows measure fit, not how the version
    does on new data."""

    training_dataset_id: str | None = Field(description="the training file's dataset (null: none on record)")
    rows: int | None = Field(description="scored rows equal to a row of the training file (null: unchecked)")
    scored_rows: int | None = Field(
        None, description="rows checked: those whose label is a class of the version (null: unchecked or older)"
    )
    training_rows: int | None = Field(description="rows of the training file with a class as label (null: unchecked)")
    training_repeated_rows: int | None = Field(
        None,
        description="rows of the training file equal to another of its rows: over training_rows, about the share "
        "of new rows from the same source equal to a training row by chance (null: unchecked, or recorded before "
        "it was kept)",
    )
    unchecked_reason: (
        Literal["no_training_file", "training_dataset_deleted", "training_file_unreadable", "training_file_too_large"]
        | None
    ) = Field(
        description="why it was not checked: the version was imported (no training file on record), its training "
        "dataset was deleted before this, that file no longer reads as the model's columns, or (a comparison, "
        "answered in the request) it has more rows than a request reads: evaluate the version instead (null: checked)"
    )


class EvaluationSummary(BaseModel):
    """An evaluation without its per-rule, slice and calibration blocks (list entries)."""

    model_config = ConfigDict(protected_namespaces=())

    id: str
    model_version: ModelRef
    dataset_id: str
    dataset_sha256: str | None = Field(
        description="SHA-256 of the scored file, kept when the dataset is deleted: compare it with the version's "
        "provenance.dataset_sha256 to know whether it was the training file (null: scored before this was kept)"
    )
    target: str
    slice_by: str | None
    state: JobState = Field(description="queued / running (background) -> succeeded or failed")
    progress: float = Field(description="0..1")
    error: str | None
    error_code: str | None = Field(description="stable code of the error (as in 4xx answers)")
    created_at: datetime
    finished_at: datetime | None
    n_rows_in_file: int | None
    n_rows: int | None = Field(description="rows scored; per-rule `n` and the confusion matrix add up to it")
    excluded: Excluded | None
    unseen_categories: dict[str, dict[str, int]] | None = Field(
        description="per categorical feature, values of scored rows the model never saw (scored; in no set)"
    )
    classes: list[Label] | None
    metrics: MetricsBlock | None
    confusion_matrix: LabelMatrix | None
    training_overlap: TrainingOverlap | None = Field(
        description="scored rows equal to rows of the version's training file (null: scored before this was checked)"
    )


class EvaluationPublic(EvaluationSummary):
    """A stored, immutable evaluation (the result blocks are null until it succeeded)."""

    calibration: Calibration | None
    rules: list[RuleEvaluation] | None
    slices: Slices | None


class EvaluationList(BaseModel):
    """A page of a version's evaluations, newest first."""

    items: list[EvaluationSummary]
    total: int
    limit: int
    offset: int


SUMMARY_KEYS = ("excluded", "unseen_categories", "classes", "metrics", "confusion_matrix", "training_overlap")
DETAIL_KEYS = ("calibration", "rules", "slices")


def result_fields(result: dict[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    """The named blocks of a stored result (all null before it exists)."""
    return {k: (result or {}).get(k) for k in keys}
