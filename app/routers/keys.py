"""The tenant's API keys, read-only: which person or system an `api_key_id` in an event or audit record is."""

from __future__ import annotations

from fastapi import APIRouter

from app.deps import CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.keys import KeyList, KeyPublic
from app.services import tenants

router = APIRouter(prefix="/v1/keys", tags=["keys"], route_class=StrictQueryRoute)


@router.get("", response_model=KeyList, responses=responses(401), summary="The tenant's API keys: ids and labels")
def list_keys(session: DbSession, principal: CurrentTenant) -> KeyList:
    """Ids, labels, creation and revocation of the caller's tenant's keys (never the keys themselves), so that a
    reviewer can tell who made a change or a decision; keys are created and revoked with `neurules-admin`."""
    me = principal.key_id
    rows = tenants.tenant_keys(session, principal.tenant_id)
    return KeyList(
        items=[
            KeyPublic(
                id=k.id,
                label=k.label,
                created_at=k.created_at,
                revoked_at=k.revoked_at,
                scope=k.scope,
                current=k.id == me,
            )
            for k in rows
        ]
    )
