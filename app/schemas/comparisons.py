"""Comparison schemas: two versions' rules diffed, and both versions' predictions on one dataset."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.schemas.evaluations import Label, LabelMatrix, MetricsBlock, TrainingOverlap
from app.schemas.predictions import ModelRef


class UnchangedRule(BaseModel):
    """A rule present in both versions with the same conditions and prediction."""

    base_rule_id: int
    other_rule_id: int
    text: str


class ConditionChange(BaseModel):
    """A condition on the same feature and op with other bounds or categories."""

    feature: str
    base: str
    other: str


class ConditionDiff(BaseModel):
    """Conditions of a changed rule pair, compared by feature and op."""

    added: list[str]
    removed: list[str]
    changed: list[ConditionChange]


class PredictionPair(BaseModel):
    """A matched rule's class in each version."""

    base: Label
    other: Label


class ChangedRule(BaseModel):
    """A matched rule pair whose conditions or prediction differ."""

    base_rule_id: int
    other_rule_id: int
    base_text: str
    other_text: str
    prediction: PredictionPair
    conditions: ConditionDiff


class AddedRule(BaseModel):
    """A rule only the other version has."""

    other_rule_id: int
    text: str


class RemovedRule(BaseModel):
    """A rule only the base version has."""

    base_rule_id: int
    text: str


class RuleDiff(BaseModel):
    """Every rule of each version, exactly once."""

    unchanged: list[UnchangedRule]
    changed: list[ChangedRule]
    added: list[AddedRule]
    removed: list[RemovedRule]


class DefaultRule(BaseModel):
    """A version's default rule."""

    prediction: Label
    support: int


class DefaultPair(BaseModel):
    """Both default rules."""

    base: DefaultRule
    other: DefaultRule


class ComparisonExcluded(BaseModel):
    """Rows left out of the side-by-side metrics."""

    missing_target: int
    unseen_class: int


class TrainingOverlaps(BaseModel):
    """Per version, how many rows of the file with a label of its classes equal rows of its training file."""

    base: TrainingOverlap
    other: TrainingOverlap


class ComparisonDataset(BaseModel):
    """Both versions on the rows of one dataset."""

    dataset_id: str
    target: str | None = Field(description="label column used for the metrics (null: none in the file)")
    n_rows: int = Field(description="every row of the file (disagreement and cross-table count them all)")
    n_scored: int | None = Field(description="rows whose target is a class of both versions (the metrics' rows)")
    excluded: ComparisonExcluded | None
    base_metrics: MetricsBlock | None
    other_metrics: MetricsBlock | None
    metrics_withheld: str | None = Field(
        None,
        description="why the metrics are null although the file has the target: its values are mostly not a "
        "version's classes (metrics on the few rows matched by chance would mislead; an evaluation refuses it)",
    )
    disagreement: float = Field(description="share of rows on which the two versions predict differently")
    n_disagree: int
    crosstab: LabelMatrix = Field(description="rows = base prediction, columns = other prediction")
    training_overlap: TrainingOverlaps | None = Field(
        None, description="per version, rows of this file equal to rows of its training file (null: no target)"
    )


class ComparisonPublic(BaseModel):
    """Two versions compared rule by rule (and on a dataset when one is given)."""

    base: ModelRef
    other: ModelRef
    rules: RuleDiff
    default: DefaultPair
    dataset: ComparisonDataset | None
