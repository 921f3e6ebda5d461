"""API key schemas (what a tenant may see of its keys: never the keys or their hashes)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class KeyPublic(BaseModel):
    """One API key of the tenant, as the registry events and the audit trail name it."""

    model_config = ConfigDict(from_attributes=True)

    id: str = Field(description="the id events, jobs and audit records name (`api_key_id`)")
    label: str = Field(description="what `neurules-admin create-key --label` gave it (who holds it)")
    created_at: datetime
    revoked_at: datetime | None = Field(description="null while the key works")
    scope: str = Field(
        description="full: everything the tenant may do; predict: decisions only; read: GET and HEAD only (a "
        "reviewer's or auditor's key: changes nothing, makes no decisions)"
    )
    current: bool = Field(description="whether this is the key of the request")


class KeyList(BaseModel):
    """The tenant's API keys, oldest first."""

    items: list[KeyPublic]
