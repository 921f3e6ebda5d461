"""Prediction schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class PredictionCreate(BaseModel):
    """Records to decide; each must have exactly the model's fields (null = missing value)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"records": [{"age": 67, "smoker": "yes"}, {"age": 41, "smoker": None}]}]},
    )

    records: list[Any] = Field(min_length=1, description="one object per record")
    explain: Literal["rules", "counterfactual", "none"] = Field(
        "rules",
        description="rules: the deciding rule and the earlier ones that failed; counterfactual: that, plus the "
        "smallest change of the record that leads to another class; none: the decision only "
        "(the query's older `explain=false` also means none; a query `explain` contradicting this one is a 422)",
    )


class ConditionExplained(BaseModel):
    """A condition with the record's value."""

    model_config = ConfigDict(extra="allow")

    feature: str
    op: str
    text: str
    value: Any = Field(
        description="the record's value as read: as sent, NaN as null, a categorical string as its CSV cell "
        "(blanks around it dropped, `NA`, `?`... missing)"
    )
    holds: bool
    filled_value: float | None = Field(None, description="fill value used when the value was missing")


class RuleNotFired(BaseModel):
    """An earlier rule that did not fire, with the first condition that failed."""

    rule_id: int
    rule_text: str
    failed_condition: ConditionExplained


class Explanation(BaseModel):
    """Why: the deciding rule (0 = default rule) and the earlier rules that did not fire."""

    rule_id: int
    is_default: bool
    rule_text: str
    support: int = Field(description="training rows the rule captured")
    conditions: list[ConditionExplained]
    not_fired: list[RuleNotFired]


class FeatureChange(BaseModel):
    """One feature value to change."""

    model_config = ConfigDict(populate_by_name=True)

    feature: str
    from_: Any = Field(alias="from", description="the record's value (null when missing)")
    to: Any = Field(description="a number (numeric features) or a category (categorical ones)")


class Counterfactual(BaseModel):
    """The smallest change of the record, read off the rule list, that makes another class win; applying
    `changes` and predicting again gives `prediction` by `rule_id`."""

    found: bool
    reason: str | None = Field(None, description="why no change can (found: false)")
    changes: list[FeatureChange] | None = None
    prediction: int | str | bool | None = None
    probabilities: dict[str, float] | None = None
    rule_id: int | None = Field(None, description="the rule that would then decide (0 = default rule)")
    rule_text: str | None = None
    n_changes: int | None = None
    distance: float | None = Field(None, description="sum of |to - from| / (max - min), plus 1 per category changed")
    exact: bool | None = Field(None, description="false when the search budget ran out (a smaller change may exist)")


class PredictionPublic(BaseModel):
    """The decision for one record."""

    index: int = Field(description="position of the record in the request, from 0 (as in `records[i]`)")
    prediction: int | str | bool
    probability: float = Field(description="probability of the predicted class")
    probabilities: dict[str, float] = Field(description="class -> probability (sums to 1)")
    rule_id: int = Field(description="deciding rule: 1..k, 0 for the default rule")
    audit_seq: int = Field(
        description="the decision's audit record, committed before this answer: its place in the tenant's audit "
        "chain (`GET /v1/audit?seq=...` returns it)"
    )
    unseen_categories: dict[str, Any] | None = Field(
        None,
        description="only when the record holds categorical values training never saw: feature -> value as read "
        "(blanks around it dropped); "
        "such a value is decided as any value outside a condition's set (check for a typo)",
    )
    explanation: Explanation | None = None
    counterfactual: Counterfactual | None = Field(None, description='with `"explain": "counterfactual"` only')


class ModelRef(BaseModel):
    """The version that answered."""

    id: str
    name: str
    version: int


class PredictionList(BaseModel):
    """Decisions for every record, in request order."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "model_version": {"id": "mv_1a2b3c4d5e6f708192a3b4c5", "name": "credit-risk", "version": 3},
                    "classes": ["low", "high"],
                    "predictions": [
                        {
                            "index": 0,
                            "prediction": "high",
                            "probability": 0.9111,
                            "probabilities": {"low": 0.0889, "high": 0.9111},
                            "rule_id": 1,
                            "audit_seq": 318,
                            "explanation": {
                                "rule_id": 1,
                                "is_default": False,
                                "rule_text": "age >= 60 and smoker in {yes}",
                                "support": 43,
                                "conditions": [
                                    {
                                        "feature": "age",
                                        "op": "between",
                                        "low": 60.0,
                                        "high": None,
                                        "text": "age >= 60",
                                        "value": 67,
                                        "holds": True,
                                    },
                                    {
                                        "feature": "smoker",
                                        "op": "in",
                                        "values": ["yes"],
                                        "text": "smoker in {yes}",
                                        "value": "yes",
                                        "holds": True,
                                    },
                                ],
                                "not_fired": [],
                            },
                        }
                    ],
                }
            ]
        }
    )

    model_version: ModelRef
    classes: list[int | str | bool]
    predictions: list[PredictionPublic]
