"""Monitoring: a named model's live decisions from the audit trail (rule shares, drift, missing values)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.monitoring import IsoDateTime, MonitoringPublic
from app.services import model_monitoring
from app.services.monitoring import DriftRule

router = APIRouter(prefix="/v1/models", tags=["monitoring"], route_class=StrictQueryRoute)


@router.get(
    "/{ref}/monitoring",
    response_model=MonitoringPublic,
    responses=responses(401, 404, 422),
    summary="Decisions per rule and version in a window, against training: drift score and alert",
)
def read_monitoring(
    ref: str,
    session: DbSession,
    principal: CurrentTenant,
    state: AppState,
    since: Annotated[
        IsoDateTime | None,
        Query(description="ISO 8601 (naive = UTC); before now unless until is given; default: until - 7 days"),
    ] = None,
    until: Annotated[IsoDateTime | None, Query(description="ISO 8601 (naive = UTC); default: now")] = None,
    buckets: Annotated[int, Query(ge=1, le=1000, description="equal time slices of the window")] = 24,
) -> MonitoringPublic:
    """`ref` selects the named model; every version of it that decided something in the window is reported."""
    w = model_monitoring.window(since, until, buckets)
    settings = state.settings
    drift = DriftRule(settings.drift_alert_psi, settings.drift_min_decisions, settings.drift_min_decisions_per_rule)
    body = model_monitoring.monitor(session, principal.tenant_id, ref, w, drift=drift)
    return MonitoringPublic.model_validate(body)
