"""Audit log schemas (read-only: the log is append-only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class AuditPublic(BaseModel):
    """One audited decision."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "id": 1042,
                    "created_at": "2026-11-25T10:00:00Z",
                    "api_key_id": "key_5e2f...",
                    "model_version_id": "mv_1a2b...",
                    "input_digest": "3b9d...",
                    "output": {"prediction": "high", "probabilities": {"low": 0.09, "high": 0.91}},
                    "rule_id": 1,
                }
            ]
        },
    )

    id: int
    created_at: datetime
    api_key_id: str
    model_version_id: str
    input_digest: str
    output: dict[str, Any]
    rule_id: int


class AuditList(BaseModel):
    """A page of audit records, newest first."""

    items: list[AuditPublic]
    limit: int
    before_id: int | None
