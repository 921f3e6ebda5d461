"""Monitoring schemas: decisions per rule and version from the audit trail, against training."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, ValidatorFunctionWrapHandler, WrapValidator
from pydantic_core import PydanticCustomError

ISO_DATETIME_MESSAGE = "must be an ISO 8601 date-time, e.g. 2026-11-27T10:00:00Z"


# pydantic reads a bare number as Unix time, in milliseconds above 2e10: `until=99999999999` (meant as seconds)
# became a window in 1973 with no decisions and no alert
_NUMBER = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")


def _iso_datetime(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """A time that does not parse, in plain words (not pydantic's "Input should be a valid datetime or date");
    a number is refused the same way (the contract is ISO 8601)."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise PydanticCustomError("datetime_parsing", ISO_DATETIME_MESSAGE)
    try:
        return handler(value)
    except ValidationError:
        raise PydanticCustomError("datetime_parsing", ISO_DATETIME_MESSAGE) from None


IsoDateTime = Annotated[datetime, WrapValidator(_iso_datetime)]
"""A query parameter's date-time: ISO 8601 (a date alone is midnight); any other text is one plain message."""


class RuleShare(BaseModel):
    """One rule (list order, then the default rule, id 0) in the window."""

    rule_id: int
    rule_text: str | None
    count: int = Field(description="decisions it made in the window")
    share: float
    training_share: float | None = Field(description="its share of the training rows")


class SeriesBucket(BaseModel):
    """One time slice [start, end) of the window."""

    start: datetime
    end: datetime
    total: int
    shares: dict[str, float] = Field(description="rule id -> share of the bucket's decisions (rules that decided)")


class VersionMonitoring(BaseModel):
    """One version that decided something in the window."""

    version_id: str
    version: int
    aliases: list[str]
    total: int
    drift_psi: float | None = Field(
        description="population stability index of the rule shares against the training shares (null: no "
        "training counts in the document)"
    )
    drift_state: Literal["ok", "alert", "insufficient_data", "no_training_counts"] = Field(
        description="the verdict: `insufficient_data` below `min_decisions` decisions (PSI on a small sample is "
        "noise: it is reported but not judged), else `alert` when drift_psi >= alert_threshold, else `ok`; "
        "`no_training_counts` when drift_psi is null"
    )
    min_decisions: int = Field(
        description="decisions this version needs in the window before it is judged: max(drift_min_decisions, "
        "drift_min_decisions_per_rule x (its rules + the default rule))"
    )
    alert: bool = Field(description="drift_state == 'alert' (drift_psi >= alert_threshold with enough decisions)")
    missing_filled_share: float = Field(
        description="share of decisions whose record had a missing numeric value replaced by its fill value"
    )
    rules: list[RuleShare]
    series: list[SeriesBucket]


class MonitoringPublic(BaseModel):
    """A named model's decisions in a window, per version (newest first), from the audit trail."""

    model: str
    since: datetime
    until: datetime
    total: int = Field(description="decisions made in the window (every version)")
    alert_threshold: float = Field(description="NEURULES_DRIFT_ALERT_PSI")
    drift_min_decisions: int = Field(description="NEURULES_DRIFT_MIN_DECISIONS")
    drift_min_decisions_per_rule: int = Field(description="NEURULES_DRIFT_MIN_DECISIONS_PER_RULE")
    versions: list[VersionMonitoring]
