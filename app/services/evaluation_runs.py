"""Background evaluations on the row (the source of truth): claim, progress, heartbeat, finish, reap.

Mirrors the training job's state machine: a worker claims a queued row (or one whose worker went
silent), writes progress with a heartbeat, and finishes it only while it still holds it; a finished
row is never changed again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import and_, or_, update
from sqlalchemy.orm import Session

from app.services import jobs
from app.services.evaluations import StoredResult
from app.services.job_states import JobState
from app.services.lost_messages import Resend, stamp_lost
from app.tables import Evaluation, utcnow

ReapKind = Literal["requeued", "resent", "failed"]


def _changed_one(result: Any) -> bool:
    return int(result.rowcount) == 1


def _ours(evaluation_id: str, worker: str) -> Any:
    return and_(Evaluation.id == evaluation_id, Evaluation.state == JobState.RUNNING, Evaluation.worker == worker)


def claim(session: Session, evaluation_id: str, worker: str, *, stale_after_s: float) -> bool:
    """Atomically move a queued evaluation (or a running one whose worker went silent) to running for this
    worker; False when it is finished or another live worker has it."""
    now = utcnow()
    stale = now - timedelta(seconds=stale_after_s)
    res = session.execute(
        update(Evaluation)
        .where(
            Evaluation.id == evaluation_id,
            or_(
                Evaluation.state == JobState.QUEUED,
                and_(Evaluation.state == JobState.RUNNING, Evaluation.heartbeat_at < stale),
            ),
        )
        .values(
            state=JobState.RUNNING, worker=worker, attempts=Evaluation.attempts + 1, started_at=now, heartbeat_at=now
        )
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


def heartbeat(session: Session, evaluation_id: str, worker: str, progress: float | None = None) -> bool:
    """Refresh the heartbeat (and the progress) of an evaluation this worker runs; False when it is not ours."""
    values: dict[str, Any] = {"heartbeat_at": utcnow()}
    if progress is not None:
        values["progress"] = min(max(float(progress), 0.0), 1.0)
    res = session.execute(
        update(Evaluation)
        .where(_ours(evaluation_id, worker))
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


def succeed(session: Session, evaluation_id: str, worker: str, result: StoredResult) -> bool:
    """Store the result of an evaluation this worker runs; False when it was no longer ours."""
    res = session.execute(
        update(Evaluation)
        .where(_ours(evaluation_id, worker))
        .values(
            state=JobState.SUCCEEDED,
            progress=1.0,
            n_rows_in_file=result.n_rows_in_file,
            n_rows=result.n_rows,
            result=result.blocks,
            error=None,
            error_code=None,
            finished_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


def fail(session: Session, evaluation_id: str, worker: str | None, code: str, message: str) -> bool:
    """Mark an evaluation failed with a readable reason (this worker's, or a queued one when worker is None)."""
    cond = (
        _ours(evaluation_id, worker)
        if worker is not None
        else and_(Evaluation.id == evaluation_id, Evaluation.state == JobState.QUEUED)
    )
    res = session.execute(
        update(Evaluation)
        .where(cond)
        .values(state=JobState.FAILED, error=message[:2000], error_code=code[:64], finished_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return _changed_one(res)


@dataclass(frozen=True)
class ReapAction:
    """What the reaper did to one evaluation."""

    evaluation_id: str
    action: ReapKind


def reap(
    session: Session,
    *,
    stale_after_s: float,
    max_attempts: int,
    resend: Resend | None,
    now: datetime | None = None,
    dead_worker_prefix: tuple[str, ...] = (),
) -> list[ReapAction]:
    """Running evaluations without a heartbeat for `stale_after_s`, or held by a worker known to be dead (its
    name starts with one of `dead_worker_prefix`, as for jobs): requeued while attempts are left, else failed;
    queued ones whose message is gone (`resend`, see `app.services.lost_messages`): stamped and reported
    "resent"."""
    now = now or utcnow()
    out = [ReapAction(i, "resent") for i in (stamp_lost(session, Evaluation, resend, now) if resend else [])]
    silent = or_(
        Evaluation.heartbeat_at < now - timedelta(seconds=stale_after_s),
        *(Evaluation.worker.startswith(prefix, autoescape=True) for prefix in dead_worker_prefix),
    )
    stale = and_(Evaluation.state == JobState.RUNNING, silent)
    rows = session.scalars(
        update(Evaluation)
        .where(stale, Evaluation.attempts < max_attempts)
        .values(state=JobState.QUEUED, worker=None, heartbeat_at=now)
        .returning(Evaluation.id)
        .execution_options(synchronize_session=False)
    ).all()
    out += [ReapAction(i, "requeued") for i in rows]
    rows = session.scalars(
        update(Evaluation)
        .where(stale, Evaluation.attempts >= max_attempts)
        .values(
            state=JobState.FAILED,
            error_code="worker_lost",
            error="the worker scoring it stopped answering too many times; start the evaluation again",
            finished_at=now,
        )
        .returning(Evaluation.id)
        .execution_options(synchronize_session=False)
    ).all()
    out += [ReapAction(i, "failed") for i in rows]
    return out


def hand_back(session: Session, worker_prefix: str, now: datetime | None = None) -> list[str]:
    """Running evaluations of a worker stopping cleanly (its name starts with `worker_prefix`), queued again with
    their attempt given back (`jobs.hand_back` for evaluations); their ids."""
    return jobs.requeue_held(session, Evaluation, worker_prefix, now)


__all__ = ["ReapAction", "claim", "fail", "hand_back", "heartbeat", "reap", "succeed"]
