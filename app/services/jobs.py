"""Job state machine on the job row (the source of truth): claim, progress, finish, cancel, reap; job queries."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol

from sqlalchemy import case, delete, func, or_, select, update
from sqlalchemy.orm import Session

from app.db import is_unavailable_error
from app.services import job_history
from app.services.errors import Conflict, NotFound, Unavailable
from app.services.job_states import FINAL_JOB_STATES, JobState
from app.services.lost_messages import Resend, stamp_lost
from app.services.paging import Page, page_of_scalars
from app.tables import Evaluation, Job, JobProgressPoint, ModelVersion, utcnow

log = logging.getLogger("neurules.jobs")

ReapKind = Literal["requeued", "resent", "cancelled", "failed"]


class JobQueue(Protocol):
    """Sends work to the training workers: a job id to train, an evaluation id to score (ids only)."""

    def send(self, job_id: str) -> None:
        """Enqueue one training job id."""
        ...

    def send_evaluation(self, evaluation_id: str) -> None:
        """Enqueue one background evaluation id."""
        ...


def send_or_undo(session: Session, send: Callable[[str], None], row: Job | Evaluation, what: str) -> None:
    """Send a committed queued row's id to the workers; when the broker refuses it, delete the row and raise
    Unavailable (so a 503 leaves nothing behind). When the database cannot delete it either (both down), the
    503 says so: the row stays queued, and the reaper sends it once the broker is back (a probe was told
    "nothing was created" and the job trained later)."""
    try:
        send(row.id)
    except Exception as e:  # noqa: BLE001 -- any broker failure: undo the row, answer 503
        log.error(f"could not enqueue {what}", extra={f"{what}_id": row.id, "error": repr(e)})
        problem = _broker_problem(e)
        table = type(row)
        try:
            session.execute(delete(table).where(table.id == row.id))
            session.commit()
        except Exception as undo:
            if not is_unavailable_error(undo):
                raise
            session.rollback()
            raise Unavailable(
                f"{problem}, and the database could not withdraw {what} {row.id}: it stays queued and is sent when "
                f"the broker is back; do not submit it again (it shows in GET /v1/{what}s/{row.id})",
                dependency="broker",
            ) from None
        raise Unavailable(f"{problem}; nothing was created, try again later", dependency="broker") from None
    log.info(f"{what} queued", extra={f"{what}_id": row.id, "tenant_id": row.tenant_id})


def _broker_problem(e: BaseException) -> str:
    """What the broker did, in words: a refusal with its reason (Redis out of memory...), else unreachable."""
    seen: BaseException | None = e
    for _ in range(5):  # the client library may wrap it (kombu's OperationalError around redis-py's)
        if seen is None:
            break
        if any(c.__name__ == "ResponseError" for c in type(seen).__mro__):  # redis-py: the broker answered, no
            return f"the job broker refused the message ({str(e)[:200]})"
        folder = getattr(seen, "folder_problem", None)  # the embedded broker's folder (`worker.broker_files`)
        if isinstance(folder, str):
            return f"the job broker's folder cannot be written ({folder}): free space there or make it writable"
        seen = seen.__cause__ or seen.__context__
    return "the job broker is unreachable"


def _changed_one(result: Any) -> bool:
    """Whether an UPDATE changed exactly one row (`Result` is typed without `rowcount`)."""
    return int(result.rowcount) == 1


def claim(session: Session, job_id: str, worker: str, now: datetime | None = None) -> bool:
    """Atomically move a queued job to running for this worker; False when someone else has it."""
    now = now or utcnow()
    res = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.QUEUED, Job.cancel_requested.is_(False))
        .values(
            state=JobState.RUNNING,
            attempts=Job.attempts + 1,
            worker=worker,
            started_at=now,
            heartbeat_at=now,
            error=None,
            # a new attempt starts from epoch 0: the job showed the dead attempt's epoch and loss as the new one's
            # (its history keeps every attempt's points, each marked with its attempt)
            epoch=0,
            loss=None,
            val_score=None,
        )
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


HANDED_BACK = "the service stopped while this job trained; queued again (that attempt is not counted)"


def hand_back(session: Session, worker_prefix: str, now: datetime | None = None) -> list[str]:
    """Running jobs of a worker stopping cleanly (its name starts with `worker_prefix`), put back in the queue with
    their attempt given back; their ids. A stop is no failure: two deploys during one long training failed it with
    "worker lost" (the start-up sweep requeued the job, counting the attempt). Cancelled ones are left to the sweep."""
    return requeue_held(session, Job, worker_prefix, now, Job.cancel_requested.is_(False), error=HANDED_BACK)


def requeue_held(
    session: Session,
    table: type[Job] | type[Evaluation],
    worker_prefix: str,
    now: datetime | None,
    *where: Any,
    **values: Any,
) -> list[str]:
    """Running rows of `table` (jobs or evaluations) held by a worker whose name starts with `worker_prefix` (and
    matching `where`), queued again with their attempt given back and `values` set; their ids."""
    ids = session.scalars(
        update(table)
        .where(table.state == JobState.RUNNING, table.worker.startswith(worker_prefix, autoescape=True), *where)
        .values(
            state=JobState.QUEUED,
            worker=None,
            heartbeat_at=now or utcnow(),
            attempts=case((table.attempts > 0, table.attempts - 1), else_=0),
            **values,
        )
        .returning(table.id)
        .execution_options(synchronize_session=False)
    ).all()
    return list(ids)


def heartbeat(session: Session, job_id: str, worker: str) -> bool:
    """Refresh the heartbeat of a job this worker runs; False when the job is no longer ours."""
    res = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.worker == worker)
        .values(heartbeat_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


def write_progress(session: Session, job_id: str, worker: str, progress: dict[str, Any]) -> None:
    """Record epoch / loss / validation score (and a heartbeat), and append the point to the history."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.worker == worker)
        .values(
            epoch=int(progress.get("epoch", 0)),
            n_epochs=int(progress.get("n_epochs", 0)),
            loss=_num(progress.get("loss")),
            val_score=_num(progress.get("val_score")),
            heartbeat_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    job_history.append_point(session, job_id, worker, progress)


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def cancel_requested(session: Session, job_id: str) -> bool:
    """Whether cancellation was asked for (or the job left the running state)."""
    row = session.execute(select(Job.cancel_requested, Job.state).where(Job.id == job_id)).one_or_none()
    return row is None or bool(row[0]) or row[1] != JobState.RUNNING


def finish(
    session: Session,
    job_id: str,
    worker: str,
    state: JobState,
    *,
    error: str | None = None,
    model_version_id: str | None = None,
) -> bool:
    """Move a running job of this worker to a final state; False when it was no longer ours."""
    res = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.worker == worker)
        .values(state=state, error=error, model_version_id=model_version_id, finished_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


def succeed(session: Session, job_id: str, worker: str, *, model_version_id: str, device: str) -> None:
    """Mark a running job of this worker succeeded with its new model version (the caller holds its row lock)."""
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.state == JobState.RUNNING, Job.worker == worker)
        .values(
            state=JobState.SUCCEEDED, model_version_id=model_version_id, device=device, error=None, finished_at=utcnow()
        )
        .execution_options(synchronize_session=False)
    )


def lock_if_ours(session: Session, job_id: str, worker: str) -> Job | None:
    """The job row, locked, when this worker still runs it; None otherwise."""
    job = session.get(Job, job_id, with_for_update=True)
    if job is None or job.state != JobState.RUNNING or job.worker != worker:
        return None
    return job


def request_cancel(session: Session, job: Job) -> Job:
    """Cancel a queued job at once, or ask a running one to stop at its next epoch.

    Each write is conditional on the state just read, so a worker claiming or finishing the job
    meanwhile is never overwritten (a claimed job is then asked to stop; a finished one is a 409).
    """
    for _ in range(5):
        if job.state in FINAL_JOB_STATES:
            raise Conflict(f"job {job.id} already {job.state}; nothing to cancel", code="job_finished")
        values: dict[str, Any] = {"cancel_requested": True}
        if job.state == JobState.QUEUED:
            values.update(state=JobState.CANCELLED, finished_at=utcnow(), error="cancelled before it started")
        res = session.execute(
            update(Job)
            .where(Job.id == job.id, Job.state == job.state)
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        session.refresh(job)
        if _changed_one(res):
            return job
    raise Conflict(f"job {job.id} is changing state; try again", code="job_busy")


def cancel_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """Cancel one of the tenant's jobs (see `request_cancel`); committed."""
    job = request_cancel(session, get_job(session, tenant_id, job_id))
    session.commit()
    return job


@dataclass(frozen=True)
class ReapAction:
    """What the reaper did to one job."""

    job_id: str
    action: ReapKind


def reap(
    session: Session,
    *,
    stale_after_s: float,
    max_attempts: int,
    now: datetime | None = None,
    dead_worker_prefix: str | tuple[str, ...] | None = None,
    resend: Resend | None = None,
) -> list[ReapAction]:
    """Running jobs without a heartbeat for `stale_after_s` (or held by a worker known to be dead):
    requeue them while attempts are left, else fail them.

    Queued jobs whose message is gone (`resend`, see `app.services.lost_messages`) are stamped and
    reported "resent": the caller sends them again."""
    now = now or utcnow()
    lost = stamp_lost(session, Job, resend, now, Job.cancel_requested.is_(False)) if resend else []
    out = [ReapAction(job_id, "resent") for job_id in lost]
    cutoff = now - timedelta(seconds=stale_after_s)
    cond = Job.heartbeat_at < cutoff
    prefixes = (dead_worker_prefix,) if isinstance(dead_worker_prefix, str) else dead_worker_prefix or ()
    for prefix in prefixes:
        cond = or_(cond, Job.worker.startswith(prefix, autoescape=True))
    stale = session.scalars(
        select(Job).where(Job.state == JobState.RUNNING, cond).with_for_update(skip_locked=True)
    ).all()
    out += [ReapAction(job.id, _reap_stale(job, now, max_attempts)) for job in stale]
    session.flush()
    return out


def _reap_stale(job: Job, now: datetime, max_attempts: int) -> ReapKind:
    """Cancel, requeue or fail a running job whose worker went silent; what was done."""
    last = job.heartbeat_at.isoformat() if job.heartbeat_at else "never"
    if job.cancel_requested:
        job.state, job.finished_at = JobState.CANCELLED, now
        job.error = f"cancelled; worker {job.worker} vanished (last heartbeat {last})"
        return "cancelled"
    if job.attempts < max_attempts:
        job.error = f"worker {job.worker} vanished (last heartbeat {last}); requeued"
        job.state, job.worker, job.heartbeat_at = JobState.QUEUED, None, now
        return "requeued"
    job.state, job.finished_at = JobState.FAILED, now
    job.error = (
        f"worker lost: no heartbeat from {job.worker} since {last} after {job.attempts} attempt(s); resubmit the job"
    )
    return "failed"


def history(session: Session, tenant_id: str, job_id: str) -> list[JobProgressPoint]:
    """Every progress point of one of the tenant's jobs, oldest first; NotFound otherwise."""
    return job_history.points(session, get_job(session, tenant_id, job_id).id)


def get_job(session: Session, tenant_id: str, job_id: str) -> Job:
    """The tenant's job; NotFound otherwise."""
    job = session.get(Job, job_id)
    if job is None or job.tenant_id != tenant_id:
        raise NotFound(f"job {job_id!r} not found")
    return job


def list_jobs(
    session: Session,
    tenant_id: str,
    *,
    state: JobState | None = None,
    dataset_id: str | None = None,
    model_name: str | None = None,
    limit: int,
    offset: int,
) -> Page[Job]:
    """The tenant's jobs, newest first, optionally filtered."""
    q = select(Job).where(Job.tenant_id == tenant_id)
    if state:
        q = q.where(Job.state == state)
    if dataset_id:
        q = q.where(Job.dataset_id == dataset_id)
    if model_name:
        q = q.where(Job.model_name == model_name)
    return page_of_scalars(session, q, (Job.created_at.desc(), Job.id), limit, offset)


def count_by_state(session: Session) -> dict[JobState, int]:
    """Job counts per state over all tenants (for the metrics gauge)."""
    return {JobState(k): int(v) for k, v in session.execute(select(Job.state, func.count()).group_by(Job.state)).all()}


def rules_kept(session: Session, jobs: Sequence[Job]) -> dict[str, int]:
    """How many rules the version each succeeded job produced kept (job id -> count; others absent)."""
    job_of = {j.model_version_id: j.id for j in jobs if j.model_version_id}
    if not job_of:
        return {}
    rows = session.execute(select(ModelVersion.id, ModelVersion.metrics).where(ModelVersion.id.in_(list(job_of))))
    out = {}
    for version_id, metrics in rows:
        n = (metrics or {}).get("n_rules")
        if isinstance(n, int):
            out[job_of[version_id]] = n
    return out
