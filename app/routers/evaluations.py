"""Evaluations: score a model version on a labelled dataset (201 in the request, 202 in the background)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.evaluations import (
    DETAIL_KEYS,
    SUMMARY_KEYS,
    EvaluationCreate,
    EvaluationList,
    EvaluationPublic,
    EvaluationSummary,
    result_fields,
)
from app.schemas.predictions import ModelRef
from app.services import evaluations
from app.services.evaluations import EvaluationRequest, VersionRef
from app.services.job_states import JobState
from app.tables import Evaluation

router = APIRouter(tags=["evaluations"], route_class=StrictQueryRoute)


def _base(row: Evaluation, mv: VersionRef) -> dict[str, object]:
    return {
        "id": row.id,
        "model_version": ModelRef(id=mv.id, name=mv.name, version=mv.version),
        "dataset_id": row.dataset_id,
        "dataset_sha256": row.dataset_sha256,
        "target": row.target,
        "slice_by": row.slice_by,
        "state": row.state,
        "progress": row.progress,
        "error": row.error,
        "error_code": row.error_code,
        "created_at": row.created_at,
        "finished_at": row.finished_at,
        "n_rows_in_file": row.n_rows_in_file,
        "n_rows": row.n_rows,
    }


def summary(row: Evaluation, mv: VersionRef) -> EvaluationSummary:
    """Evaluation row -> list entry."""
    return EvaluationSummary.model_validate({**_base(row, mv), **result_fields(row.result, SUMMARY_KEYS)})


def public(row: Evaluation, mv: VersionRef) -> EvaluationPublic:
    """Evaluation row -> full answer."""
    blocks = result_fields(row.result, SUMMARY_KEYS + DETAIL_KEYS)
    return EvaluationPublic.model_validate({**_base(row, mv), **blocks})


@router.post(
    "/v1/models/{ref}/evaluations",
    operation_id="models_evaluations_create",  # the GET on the same path is models_evaluations_list
    status_code=201,
    response_model=EvaluationPublic,
    responses={
        202: {"model": EvaluationPublic, "description": "a large dataset: queued for the training workers; poll it"},
        **responses(401, 404, 422, 503),
    },
    summary="Score a version on a labelled dataset: metrics, confusion matrix, calibration, per-rule accuracy",
)
def create_evaluation(
    ref: str, body: EvaluationCreate, session: DbSession, principal: CurrentTenant, state: AppState
) -> JSONResponse:
    """201 with the stored result for datasets up to NEURULES_EVALUATION_SYNC_MAX_ROWS rows, else 202 (queued)."""
    req = EvaluationRequest(body.dataset_id, body.target, body.slice_by)
    row, version = evaluations.create_evaluation(
        session,
        state.queue,
        principal.tenant_id,
        ref,
        req,
        sync_max_rows=state.settings.evaluation_sync_max_rows,
    )
    answer = public(row, version)
    status = 201 if row.state == JobState.SUCCEEDED else 202
    return JSONResponse(answer.model_dump(mode="json", by_alias=True), status_code=status)


@router.get(
    "/v1/models/{ref}/evaluations",
    operation_id="models_evaluations_list",
    response_model=EvaluationList,
    responses=responses(401, 404, 422),
    summary="A version's evaluations, newest first (summaries)",
)
def list_evaluations(
    ref: str,
    session: DbSession,
    principal: CurrentTenant,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> EvaluationList:
    """Summaries: no `rules`, `slices` or `calibration`."""
    mv, page = evaluations.list_evaluations(session, principal.tenant_id, ref, limit=limit, offset=offset)
    return EvaluationList(items=[summary(r, mv) for r in page.items], total=page.total, limit=limit, offset=offset)


@router.get(
    "/v1/evaluations/{evaluation_id}",
    response_model=EvaluationPublic,
    responses=responses(401, 404),
    summary="One evaluation: its state and progress, then its stored result",
)
def read_evaluation(evaluation_id: str, session: DbSession, principal: CurrentTenant) -> EvaluationPublic:
    """The evaluation with every block of its result."""
    row = evaluations.get_evaluation(session, principal.tenant_id, evaluation_id)
    return public(row, evaluations.version_of(session, row))
