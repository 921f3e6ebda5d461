"""Comparisons: two versions side by side (rules; predictions and metrics on a dataset)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.comparisons import ComparisonPublic
from app.services.comparisons import compare_versions

router = APIRouter(prefix="/v1/models", tags=["comparisons"], route_class=StrictQueryRoute)


@router.get(
    "/{ref}/compare",
    response_model=ComparisonPublic,
    responses=responses(401, 404, 422),
    summary="Compare two versions: rules added / removed / changed, and both on a dataset",
)
def compare(
    ref: str,
    session: DbSession,
    principal: CurrentTenant,
    state: AppState,
    other: Annotated[str, Query(min_length=1, max_length=200, description="the other version's reference")],
    dataset_id: Annotated[
        str | None,
        Query(
            min_length=1, max_length=40, description="score both on this dataset: disagreement, cross-table, metrics"
        ),
    ] = None,
    target: Annotated[
        str | None, Query(min_length=1, max_length=300, description="label column (default: the model's target)")
    ] = None,
) -> ComparisonPublic:
    """`ref` is the base version, `other` the one compared with it. With a dataset, both are scored in the
    request: a dataset over NEURULES_EVALUATION_SYNC_MAX_ROWS rows is a 422 `dataset_too_large_to_compare`.
    Versions trained for different targets are a 422 `targets_differ` (field `other`)."""
    body = compare_versions(
        session,
        principal.tenant_id,
        ref,
        other,
        dataset_id=dataset_id,
        target=target,
        sync_max_rows=state.settings.evaluation_sync_max_rows,
    )
    return ComparisonPublic.model_validate(body)
