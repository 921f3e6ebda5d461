"""Prediction schemas."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PredictionCreate(BaseModel):
    """Records to decide; each must have exactly the model's fields (null = missing value)."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"records": [{"age": 67, "smoker": "yes"}, {"age": 41, "smoker": None}]}]},
    )

    records: list[Any] = Field(min_length=1, description="one object per record")


class ConditionExplained(BaseModel):
    """A condition with the record's value."""

    model_config = ConfigDict(extra="allow")

    feature: str
    op: str
    text: str
    value: Any = Field(description="the record's value as sent")
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


class PredictionPublic(BaseModel):
    """The decision for one record."""

    index: int = Field(description="position of the record in the request, from 0 (as in `records[i]`)")
    prediction: int | str | bool
    probability: float = Field(description="probability of the predicted class")
    probabilities: dict[str, float] = Field(description="class -> probability (sums to 1)")
    rule_id: int = Field(description="deciding rule: 1..k, 0 for the default rule")
    explanation: Explanation | None = None


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
