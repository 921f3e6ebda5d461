"""The tenant's append-only audit log of prediction decisions (read-only) and the check of its hash chain."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.audit import AuditList, AuditPublic, AuditVerification
from app.services import audit, audit_verify

router = APIRouter(prefix="/v1/audit", tags=["audit"], route_class=StrictQueryRoute)


@router.get(
    "",
    response_model=AuditList,
    responses=responses(401, 404, 422),
    summary="Audited decisions, newest first (page with before_seq)",
)
def list_audit(
    session: DbSession,
    principal: CurrentTenant,
    model_version_id: Annotated[str | None, Query(min_length=1)] = None,
    input_digest: Annotated[
        str | None,
        Query(
            pattern="^[0-9a-fA-F]{64}$",
            description="SHA-256 (64 hex digits) of the record's canonical JSON; docs/audit.md says how to compute it",
        ),
    ] = None,
    seq: Annotated[
        int | None,
        Query(ge=1, le=2**63 - 1, description="the record at this place in the chain (a decision's `audit_seq`)"),
    ] = None,
    before_seq: Annotated[
        int | None,
        Query(ge=1, le=2**63 - 1, description="only records before this place in the chain (the last page's last seq)"),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditList:
    """The tenant's audit records (time, key, model version, input digest, output, rule id)."""
    rows = audit.list_records(
        session,
        principal.tenant_id,
        model_version_id=model_version_id,
        input_digest=None if input_digest is None else input_digest.lower(),
        seq=seq,
        before_seq=before_seq,
        limit=limit,
    )
    return AuditList(items=[AuditPublic.model_validate(r) for r in rows], limit=limit, before_seq=before_seq)


@router.get(
    "/verify",
    response_model=AuditVerification,
    responses=responses(401),
    summary="Check the tenant's audit hash chain: intact, or the first broken link",
)
def verify_audit(session: DbSession, principal: CurrentTenant) -> AuditVerification:
    """Recompute every row's hash in chain order and compare the tail with the chain head (streamed in pages)."""
    return AuditVerification.model_validate(audit_verify.verify_tenant(session, principal.tenant_id))
