"""Model registry schemas: versions, named models, aliases."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.schemas.reviews import ApprovalPublic

EXAMPLE_RULE_LIST: dict[str, Any] = {
    "format": "neurules.rulelist",
    "version": 1,
    "target": "risk",
    "classes": ["low", "high"],
    "features": [
        {"name": "age", "type": "numeric", "fill_value": 50.0, "min": 20.0, "max": 80.0},
        {"name": "smoker", "type": "categorical", "categories": ["yes", "no"]},
    ],
    "rules": [
        {
            "conditions": [
                {"feature": "age", "op": "between", "low": 60.0, "high": None},
                {"feature": "smoker", "op": "in", "values": ["yes"]},
            ],
            "class_counts": [3, 40],
            "probabilities": [0.0889, 0.9111],
        }
    ],
    "default": {"class_counts": [120, 30], "probabilities": [0.7961, 0.2039]},
    "smoothing": 1.0,
    "metadata": {},
}


class ModelCreate(BaseModel):
    """Import a rule list trained elsewhere (e.g. in a notebook) as a new version of `name`."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        json_schema_extra={"examples": [{"name": "credit-risk", "rule_list": EXAMPLE_RULE_LIST, "metrics": {}}]},
    )

    name: str = Field(
        description="registered model name: 1 to 100 letters, digits, '_', '.' or '-', starting with a letter or "
        "digit (taken as sent: nothing is trimmed or shortened)"
    )
    rule_list: dict[str, Any] = Field(description="a `neurules.rulelist` document (see docs/rulelist-format.md)")
    metrics: dict[str, Any] = Field(
        default_factory=dict,
        description="the importer's own figures, stored as sent (finite numbers only) and shown as supplied with "
        "the import, not measured by the service. The keys a training job writes (`holdout`, `holdout_evaluation`, "
        "`train`, `test_size`, `n_rules`, `rows_without_target_dropped`: what the service measured on the rows it "
        "held out) are refused (422 naming `metrics.<key>`): use other names",
    )


class ModelVersionSummary(BaseModel):
    """A version without its document."""

    id: str
    name: str
    version: int
    n_rules: int = Field(
        description="rules in the list, besides the default rule (a training job's `parameters.n_rules` is the "
        "most it may keep)"
    )
    metrics: dict[str, Any]
    job_id: str | None
    created_at: datetime


class ModelVersionPublic(ModelVersionSummary):
    """An immutable version: rule list document, text, metrics, input schema and provenance."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "id": "mv_1a2b3c4d5e6f708192a3b4c5",
                    "name": "credit-risk",
                    "version": 3,
                    "n_rules": 1,
                    "metrics": {"holdout": {"accuracy": 0.84, "weighted_f1": 0.83, "n_rows": 54}},
                    "job_id": None,
                    "created_at": "2026-11-25T10:00:00Z",
                    "rule_list": EXAMPLE_RULE_LIST,
                    "text": "if age >= 60 and smoker in {yes} then risk = high  (p=0.91, support 43)\n"
                    "else risk = low  (p=0.80, support 150)",
                    "condition_texts": [["age >= 60", "smoker in {yes}"]],
                    "input_schema": EXAMPLE_RULE_LIST["features"],
                    "provenance": {
                        "dataset_sha256": "9f2b...",
                        "parameters": {"n_rules": 10},
                        "seed": 0,
                        "packages": {"numpy": "2.4.6", "torch": "2.13.0"},
                    },
                    "aliases": ["production"],
                    "approval": {
                        "state": "approved",
                        "required": True,
                        "api_key_id": "key_9a8b7c6d5e4f30211203a4b5",
                        "at": "2026-11-26T09:00:00Z",
                        "note": "read the rules; evaluated on the 2026 holdout; compared with version 2",
                        "evaluation_ids": ["ev_0a1b2c3d4e5f60718293a4b5"],
                        "seq": 9,
                    },
                }
            ]
        }
    )

    rule_list: dict[str, Any]
    text: str
    condition_texts: list[list[str]] = Field(
        description="per rule of `rule_list` (in order, the default rule aside), each condition as the service "
        "writes it for people: the same text as in `text`, explanations, evaluations and comparisons"
    )
    input_schema: list[dict[str, Any]]
    provenance: dict[str, Any]
    aliases: list[str] = Field(default_factory=list)
    approval: ApprovalPublic = Field(
        description='the latest review of the version (docs/governance-api.md, "Reviews and the approval gate")'
    )


class ModelVersionList(BaseModel):
    """A page of versions, newest first."""

    items: list[ModelVersionSummary]
    total: int
    limit: int
    offset: int


class RegisteredModelPublic(BaseModel):
    """A named model with its aliases."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "credit-risk",
                    "latest_version": 3,
                    "n_versions": 3,
                    "aliases": {"production": "mv_1a2b3c4d5e6f708192a3b4c5"},
                    "created_at": "2026-11-25T10:00:00Z",
                }
            ]
        }
    )

    name: str
    latest_version: int | None
    n_versions: int
    aliases: dict[str, str] = Field(description="alias -> version id")
    created_at: datetime


class RegisteredModelList(BaseModel):
    """All named models of the tenant."""

    items: list[RegisteredModelPublic]
    total: int
    limit: int
    offset: int


class AliasUpdate(BaseModel):
    """Point an alias at a version, by number or by id."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [{"version": 3}]})

    version: int | None = Field(None, ge=1, le=2**31 - 1)
    # an id is `mv_` and hex: an empty one was looked up (a 404), one with a NUL refused naming no field
    version_id: str | None = Field(None, min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")

    @model_validator(mode="after")
    def _one(self) -> AliasUpdate:
        """Exactly one of version / version_id."""
        if (self.version is None) == (self.version_id is None):
            raise ValueError("give exactly one of 'version' or 'version_id'")
        return self


class AliasPublic(BaseModel):
    """Where an alias points."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "credit-risk",
                    "alias": "production",
                    "version": 3,
                    "version_id": "mv_1a2b3c4d5e6f708192a3b4c5",
                    "updated_at": "2026-11-25T10:00:00Z",
                }
            ]
        }
    )

    name: str
    alias: str
    version: int
    version_id: str
    updated_at: datetime
