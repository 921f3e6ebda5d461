"""Live training workers: the heartbeat row each worker refreshes, and who counts as alive (for /readyz)."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, select, update
from sqlalchemy.orm import Session

from app.tables import WorkerHeartbeat, utcnow


def beat(session: Session, *, name: str, queue: str, hostname: str, pid: int, now: datetime | None = None) -> None:
    """Record that a worker is alive: refresh its row, or insert it on the first beat (the caller commits)."""
    now = now or utcnow()
    res = session.execute(
        update(WorkerHeartbeat)
        .where(WorkerHeartbeat.name == name)
        .values(seen_at=now, queue=queue)
        .execution_options(synchronize_session=False)
    )
    if int(getattr(res, "rowcount", 0)) == 0:  # only this worker writes its row: no race on the insert
        session.add(WorkerHeartbeat(name=name, queue=queue, hostname=hostname, pid=pid, started_at=now, seen_at=now))


def leave(session: Session, name: str) -> None:
    """Remove a worker's row (it stops cleanly); the caller commits."""
    session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.name == name))


def prune(session: Session, *, older_than: datetime) -> None:
    """Forget workers not seen since `older_than` (killed ones leave their row behind); the caller commits."""
    session.execute(delete(WorkerHeartbeat).where(WorkerHeartbeat.seen_at < older_than))


def live_workers(session: Session, queue: str, *, within_s: float, now: datetime | None = None) -> list[str]:
    """Names of the workers on `queue` seen in the last `within_s` seconds."""
    return _seen_since(session, WorkerHeartbeat.queue == queue, within_s, now)


def live_on_host(session: Session, hostname: str, *, within_s: float, now: datetime | None = None) -> list[str]:
    """Names of the workers on `hostname` (any queue) seen in the last `within_s` seconds."""
    return _seen_since(session, WorkerHeartbeat.hostname == hostname, within_s, now)


def _seen_since(session: Session, which: ColumnElement[bool], within_s: float, now: datetime | None) -> list[str]:
    cutoff = (now or utcnow()) - timedelta(seconds=within_s)
    q = select(WorkerHeartbeat.name).where(which, WorkerHeartbeat.seen_at >= cutoff)
    return list(session.scalars(q.order_by(WorkerHeartbeat.name)).all())
