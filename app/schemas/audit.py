"""Audit log schemas (read-only: the log is append-only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class AuditPublic(BaseModel):
    """One audited decision."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "created_at": "2026-11-25T10:00:00Z",
                    "api_key_id": "key_5e2f...",
                    "model_version_id": "mv_1a2b...",
                    "input_digest": "3b9d...",
                    "output": {"prediction": "high", "probabilities": {"low": 0.09, "high": 0.91}},
                    "rule_id": 1,
                    "seq": 318,
                    "prev_hash": "9f1c...",
                    "row_hash": "04ab...",
                    "missing_filled": False,
                }
            ]
        },
    )

    # no storage id: it numbers every tenant's rows together, so gaps between a tenant's ids would show how many
    # decisions other tenants obtained meanwhile; `seq` is the record's place in the tenant's own chain
    # null only in a row changed outside the service into a value its column cannot hold (`unreadable` says which)
    created_at: datetime | None
    api_key_id: str | None
    model_version_id: str | None
    input_digest: str | None
    output: dict[str, Any] | None
    rule_id: int | None
    seq: int | None = Field(description="the row's place in the tenant's hash chain (1, 2, 3, ...)")
    prev_hash: str | None = Field(description="row_hash of the tenant's previous row (64 zeros for the first)")
    row_hash: str | None = Field(description="SHA-256 of this row's canonical content (docs/audit.md)")
    missing_filled: bool | None = Field(
        description="a numeric value was missing and evaluated at its fill value (null: not recorded, older rows)"
    )
    unreadable: str | None = Field(
        None,
        description="null; else what in this row cannot be read (a row changed outside the service into a value "
        "its column cannot hold: those fields are null; GET /v1/audit/verify names the break)",
    )


class AuditList(BaseModel):
    """A page of audit records, newest first."""

    items: list[AuditPublic]
    limit: int
    before_seq: int | None


BreakKind = Literal[
    "sequence_gap",
    "sequence_repeated",
    "sequence_before_start",
    "previous_hash_mismatch",
    "content_hash_mismatch",
    "unreadable_row",
    "unreadable_head",
    "truncated_tail",
    "head_mismatch",
    "beyond_head",
    "missing_head",
    "alias_state_mismatch",
    "version_state_mismatch",
    "version_content_mismatch",
    "version_details_mismatch",
    "model_name_mismatch",
]


class ChainBreakPublic(BaseModel):
    """The first broken link of a chain."""

    model_config = ConfigDict(from_attributes=True)

    kind: BreakKind = Field(
        description="sequence_gap: rows deleted; sequence_repeated: a duplicated row; sequence_before_start: a row "
        "with seq 0 or below, inserted outside the writer (chains start at 1); previous_hash_mismatch: "
        "a row replaced or forged; content_hash_mismatch: a row changed; unreadable_row: a row changed into "
        "values its columns cannot hold (text that is not JSON as its output, no time as its created_at); "
        "unreadable_head: the chain head holds a seq or hash no head can hold (edited outside the service); "
        "truncated_tail: rows deleted at the end; "
        "head_mismatch: the last row differs from the chain head; beyond_head: rows appended outside the writer; "
        "missing_head: the chain head was deleted; alias_state_mismatch (registry events only): a model's aliases "
        "differ from what its events say (an alias changed, added or removed without its event); "
        "version_state_mismatch (registry events only): a model's versions differ from those its events created; "
        "version_content_mismatch (registry events only): a version's rule list is not the one its event sealed; "
        "version_details_mismatch (registry events only): a version's metrics, input schema or provenance are not "
        "the ones its event sealed; model_name_mismatch (registry events only): a model's name is not the one its "
        "events were recorded for (renamed, or names swapped, in the database)"
    )
    message: str
    seq: int | None = Field(description="the sequence number at the break")


class ChainHeadPublic(BaseModel):
    """The last link of a chain, as the chain head records it."""

    model_config = ConfigDict(from_attributes=True)

    seq: int
    row_hash: str


class RegistryBreakPublic(BaseModel):
    """The first broken link of a model's registry event chain."""

    model_config = ConfigDict(from_attributes=True)

    model: str = Field(description="the registered model whose event chain breaks")
    registered_model_id: str
    kind: BreakKind = Field(description="as for decisions: rows here are the model's registry events")
    message: str
    seq: int | None = Field(description="the event's place in the model's chain")


class RegistryVerification(BaseModel):
    """The check of the tenant's registry event chains: who set, moved or deleted an alias or created a version."""

    model_config = ConfigDict(from_attributes=True)

    intact: bool
    models_checked: int = Field(description="registered models whose event chains were checked (to the first break)")
    events_checked: int = Field(description="events whose links were checked, up to the first break")
    first_break: RegistryBreakPublic | None


class AuditVerification(BaseModel):
    """The check of the tenant's audit hash chains: its decisions (intact with the rows checked, or the first broken
    link) and its registry events (alias changes and new versions, one chain per model)."""

    model_config = ConfigDict(
        from_attributes=True,
        json_schema_extra={
            "examples": [
                {
                    "tenant_id": "tn_8c1d...",
                    "intact": False,
                    "rows_checked": 41,
                    "head": {"seq": 318, "row_hash": "04ab..."},
                    "first_break": {
                        "kind": "sequence_gap",
                        "message": "the next row has seq 43 where seq 42 was expected: seq 42 missing (deleted)",
                        "seq": 43,
                    },
                    "registry_events": {
                        "intact": True,
                        "models_checked": 2,
                        "events_checked": 9,
                        "first_break": None,
                    },
                }
            ]
        },
    )

    tenant_id: str
    intact: bool = Field(description="decisions and registry events both intact")
    rows_checked: int = Field(description="decision rows whose links were checked, up to the first break")
    head: ChainHeadPublic | None
    first_break: ChainBreakPublic | None = Field(description="the decisions' first broken link")
    registry_events: RegistryVerification
