"""Training history: every progress point a worker writes for a job, kept in order."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import insert, literal, select
from sqlalchemy.orm import Session

from app.services.job_states import JobState
from app.tables import Job, JobProgressPoint, utcnow

VAL_SCORE_NAME = "weighted F1 on the held-out split"


def _num(v: Any) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def append_point(session: Session, job_id: str, worker: str, progress: dict[str, Any]) -> None:
    """Append one point (epoch, loss, validation score, time) while this worker runs the job; in one
    INSERT ... SELECT, so a worker that lost the job adds nothing."""
    source = select(
        Job.id,
        Job.attempts,
        literal(int(progress.get("epoch", 0))),
        literal(_num(progress.get("loss"))),
        literal(_num(progress.get("val_score"))),
        literal(utcnow(), JobProgressPoint.at.type),
    ).where(Job.id == job_id, Job.state == JobState.RUNNING, Job.worker == worker)
    columns = ["job_id", "attempt", "epoch", "loss", "val_score", "at"]
    session.execute(insert(JobProgressPoint).from_select(columns, source))


def points(session: Session, job_id: str) -> list[JobProgressPoint]:
    """A job's progress points, oldest first (attempt by attempt when a worker was lost)."""
    q = select(JobProgressPoint).where(JobProgressPoint.job_id == job_id).order_by(JobProgressPoint.id)
    return list(session.scalars(q).all())


__all__ = ["VAL_SCORE_NAME", "append_point", "points"]
