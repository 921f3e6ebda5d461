"""Training jobs: create (202), get, list with filters, cancel."""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import NotFound, ServiceUnavailable, Unprocessable, responses
from app.routers.datasets import get_dataset
from app.schemas.jobs import JobCreate, JobList, JobProgress, JobPublic, JobState
from app.services import jobs as jobsvc
from app.services.registry import NAME_RE
from app.services.training_params import check_options
from app.settings import Settings
from app.tables import Dataset, Job, new_id, utcnow

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
log = logging.getLogger("neurules.jobs")

MIN_TRAINING_ROWS = 10


def to_public(job: Job) -> JobPublic:
    """Job row -> response."""
    return JobPublic(
        id=job.id,
        dataset_id=job.dataset_id,
        target=job.target,
        model_name=job.model_name,
        parameters=job.parameters,
        state=job.state,
        cancel_requested=job.cancel_requested,  # type: ignore[arg-type]
        progress=JobProgress(epoch=job.epoch, n_epochs=job.n_epochs, loss=job.loss, val_score=job.val_score),
        error=job.error,
        attempts=job.attempts,
        device=job.device,
        model_version_id=job.model_version_id,
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
    )


def _bad(field: str, message: str, code: str = "invalid_input") -> Unprocessable:
    return Unprocessable(f"{field}: {message}", code=code, details=[{"field": field, "message": message}])


def check_job(body: JobCreate, ds: Dataset, settings: Settings) -> str:
    """Validate a job request against the dataset profile and limits; returns the model name."""
    cols = {c["name"]: c for c in ds.columns}
    if body.target not in cols:
        raise _bad(
            "target",
            f"column {body.target!r} is not in dataset {ds.id} (columns: {', '.join(list(cols)[:30])})",
            "target_not_found",
        )
    if len(body.target) > 300:  # the job row's target column holds 300 characters
        raise _bad(
            "target",
            f"column names over 300 characters are not supported as a target "
            f"({len(body.target)} characters); rename the column",
        )
    tc = cols[body.target]
    if tc["distinct"] < 2:
        raise _bad(
            "target",
            f"column {body.target!r} has a single class; a classifier needs at least two",
            "single_class_target",
        )
    if tc["distinct"] > settings.max_classes:
        raise _bad(
            "target",
            f"column {body.target!r} has {tc['distinct']} distinct values; at most "
            f"{settings.max_classes} classes are supported (is it a continuous column?)",
            "too_many_classes",
        )
    if ds.n_rows - tc["missing"] < MIN_TRAINING_ROWS:
        raise _bad(
            "target",
            f"only {ds.n_rows - tc['missing']} rows have a target value; need {MIN_TRAINING_ROWS}",
            "too_few_rows",
        )
    p = body.parameters
    if p.n_rules > settings.max_rules:
        raise _bad("parameters.n_rules", f"at most {settings.max_rules}")
    if isinstance(p.epochs, int) and p.epochs > settings.max_epochs:
        raise _bad("parameters.epochs", f"at most {settings.max_epochs}")
    if p.features is not None:
        if not p.features:
            raise _bad("parameters.features", "must not be empty")
        unknown = [f for f in p.features if f not in cols]
        if unknown:
            raise _bad("parameters.features", f"unknown column(s): {', '.join(map(repr, unknown))}")
        if body.target in p.features:
            raise _bad("parameters.features", "must not contain the target column")
        if len(set(p.features)) != len(p.features):
            raise _bad("parameters.features", "duplicate column names")
    elif len(cols) < 2:
        raise _bad("target", "the dataset has no column besides the target")
    problem = check_options(p.n_rules, p.epochs, p.random_state, dict(p.options))
    if problem:
        raise _bad("parameters.options", problem)
    name = body.model_name or re.sub(r"[^A-Za-z0-9_.-]", "-", ds.name).strip("-.") or "model"
    if not NAME_RE.match(name[:100]):
        raise _bad("model_name", "letters, digits, '_', '.', '-' only; at most 100; must not start with '-' or '.'")
    return name[:100]


def get_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """The tenant's job or 404."""
    job = session.get(Job, job_id)
    if job is None or job.tenant_id != tenant_id:
        raise NotFound(f"job {job_id!r} not found")
    return job


@router.post(
    "",
    status_code=202,
    response_model=JobPublic,
    responses=responses(401, 404, 422, 503),
    summary="Start training; answers 202 with the job id at once",
)
def create_job(body: JobCreate, session: DbSession, principal: CurrentTenant, state: AppState) -> JobPublic:
    """Queue a training job on one of the tenant's datasets."""
    ds = get_dataset(session, principal.tenant_id, body.dataset_id)
    model_name = check_job(body, ds, state.settings)
    job = Job(
        id=new_id("job"),
        tenant_id=principal.tenant_id,
        dataset_id=ds.id,
        dataset_sha256=ds.sha256,
        target=body.target,
        model_name=model_name,
        parameters=body.parameters.model_dump(),
        state="queued",
        heartbeat_at=utcnow(),  # on a queued job: when it was last enqueued (see jobs.reap)
        n_epochs=body.parameters.epochs if isinstance(body.parameters.epochs, int) else 0,
    )
    session.add(job)
    session.commit()
    try:
        state.queue.send(job.id)
    except Exception as e:
        log.error("could not enqueue job", extra={"job_id": job.id, "error": repr(e)})
        session.execute(delete(Job).where(Job.id == job.id))
        session.commit()
        raise ServiceUnavailable(
            "the job broker is unreachable; nothing was created, try again later", code="broker_unavailable"
        ) from None
    log.info("job queued", extra={"job_id": job.id, "tenant_id": principal.tenant_id, "dataset_id": ds.id})
    return to_public(job)


@router.get("", response_model=JobList, responses=responses(401, 422))
def list_jobs(
    session: DbSession,
    principal: CurrentTenant,
    state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
    dataset_id: Annotated[str | None, Query()] = None,
    model_name: Annotated[str | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> JobList:
    """The tenant's jobs, newest first, optionally filtered."""
    q = select(Job).where(Job.tenant_id == principal.tenant_id)
    if state:
        q = q.where(Job.state == state)
    if dataset_id:
        q = q.where(Job.dataset_id == dataset_id)
    if model_name:
        q = q.where(Job.model_name == model_name)
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    rows = session.scalars(q.order_by(Job.created_at.desc(), Job.id).limit(limit).offset(offset)).all()
    return JobList(items=[to_public(j) for j in rows], total=total, limit=limit, offset=offset)


@router.get("/{job_id}", response_model=JobPublic, responses=responses(401, 404))
def read_job(job_id: str, session: DbSession, principal: CurrentTenant) -> JobPublic:
    """A job's state, progress, timestamps, result and error."""
    return to_public(get_job(session, principal.tenant_id, job_id))


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=JobPublic,
    responses=responses(401, 404, 409),
    summary="Cancel: queued jobs stop at once, running ones at their next epoch",
)
def cancel_job(job_id: str, session: DbSession, principal: CurrentTenant) -> Any:
    """Request cooperative cancellation."""
    job = get_job(session, principal.tenant_id, job_id)
    jobsvc.request_cancel(session, job)
    session.commit()
    return to_public(job)
