"""Training jobs: create (202), get, list with filters, cancel."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.jobs import JobCreate, JobHistory, JobHistoryPoint, JobList, JobPublic
from app.services import job_history, jobs
from app.services.job_states import JobState
from app.services.job_submission import JobLimits, submit_job

router = APIRouter(prefix="/v1/jobs", tags=["jobs"], route_class=StrictQueryRoute)


@router.post(
    "",
    status_code=202,
    response_model=JobPublic,
    responses=responses(401, 404, 422, 503),
    summary="Start training; answers 202 with the job id at once",
)
def create_job(body: JobCreate, session: DbSession, principal: CurrentTenant, state: AppState) -> JobPublic:
    """Queue a training job on one of the tenant's datasets."""
    s = state.settings
    limits = JobLimits(
        max_classes=s.max_classes,
        max_rules=s.max_rules,
        max_epochs=s.max_epochs,
        max_restarts=s.max_restarts,
        max_category_levels=s.max_category_levels,
        max_encoded_cells=s.max_encoded_cells,
    )
    return JobPublic.from_row(submit_job(session, state.queue, principal, body, limits))


@router.get("", response_model=JobList, responses=responses(401, 422))
def list_jobs(
    session: DbSession,
    principal: CurrentTenant,
    state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
    dataset_id: Annotated[str | None, Query(min_length=1)] = None,
    model_name: Annotated[str | None, Query(min_length=1)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> JobList:
    """The tenant's jobs, newest first, optionally filtered."""
    page = jobs.list_jobs(
        session,
        principal.tenant_id,
        state=state,
        dataset_id=dataset_id,
        model_name=model_name,
        limit=limit,
        offset=offset,
    )
    kept = jobs.rules_kept(session, page.items)
    items = [JobPublic.from_row(j, kept.get(j.id)) for j in page.items]
    return JobList(items=items, total=page.total, limit=limit, offset=offset)


@router.get("/{job_id}", response_model=JobPublic, responses=responses(401, 404))
def read_job(job_id: str, session: DbSession, principal: CurrentTenant) -> JobPublic:
    """A job's state, progress, timestamps, result and error."""
    job = jobs.get_job(session, principal.tenant_id, job_id)
    return JobPublic.from_row(job, jobs.rules_kept(session, [job]).get(job.id))


@router.get(
    "/{job_id}/history",
    response_model=JobHistory,
    responses=responses(401, 404),
    summary="Every progress point of a job: the loss and validation curves",
)
def read_history(job_id: str, session: DbSession, principal: CurrentTenant) -> JobHistory:
    """The job's progress points, oldest first."""
    rows = jobs.history(session, principal.tenant_id, job_id)
    points = [
        JobHistoryPoint(epoch=p.epoch, loss=p.loss, val_score=p.val_score, attempt=p.attempt, at=p.at) for p in rows
    ]
    return JobHistory(job_id=job_id, val_score_name=job_history.VAL_SCORE_NAME, points=points)


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=JobPublic,
    responses=responses(401, 404, 409),
    summary="Cancel: queued jobs stop at once, running ones at their next epoch",
)
def cancel_job(job_id: str, session: DbSession, principal: CurrentTenant) -> JobPublic:
    """Request cooperative cancellation."""
    job = jobs.cancel_job(session, principal.tenant_id, job_id)
    return JobPublic.from_row(job, jobs.rules_kept(session, [job]).get(job.id))
