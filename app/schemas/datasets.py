"""Dataset schemas."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ColumnPublic(BaseModel):
    """Inferred type and summary of one column."""

    name: str
    type: Literal["numeric", "categorical"]
    missing: int = Field(description="rows where the value is missing (empty, NA, NaN, null, ?, ...)")
    distinct: int = Field(description="distinct non-missing values")
    min: float | None = None
    max: float | None = None
    top_values: list[str] = Field(default_factory=list, description="most frequent values (categorical)")


class DatasetPublic(BaseModel):
    """An uploaded CSV, validated and profiled."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": "ds_4f1c2a9e0b7d6c5a3e2f1a0b",
                    "name": "heart",
                    "filename": "heart.csv",
                    "sha256": "9f2b...e1",
                    "size_bytes": 24576,
                    "n_rows": 270,
                    "n_columns": 16,
                    "columns": [
                        {
                            "name": "att_1",
                            "type": "numeric",
                            "missing": 0,
                            "distinct": 41,
                            "min": -1.0,
                            "max": 1.0,
                            "top_values": [],
                        }
                    ],
                    "created_at": "2026-11-25T10:00:00Z",
                }
            ]
        },
    )

    id: str
    name: str
    filename: str
    sha256: str
    size_bytes: int
    n_rows: int
    n_columns: int
    columns: list[ColumnPublic]
    created_at: datetime


class DatasetList(BaseModel):
    """A page of datasets, newest first."""

    items: list[DatasetPublic]
    total: int
    limit: int
    offset: int


class DatasetPreview(BaseModel):
    """The first rows of a dataset as the file has them: cells as strings, missing values as null."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"columns": ["age", "sex", "target"], "rows": [["63", "1", "1"], ["41", None, "0"]]}]
        }
    )

    columns: list[str]
    rows: list[list[str | None]]
