"""Queued work whose broker message is gone (training jobs and background evaluations alike): which to send again.

A queued row's `heartbeat_at` is when it was last enqueued. With the ids the broker holds a message for (a
scan of the broker), a queued row enqueued over `grace_s` ago without one has lost its message; without a
scan, a row queued over `timer_s` is sent again on suspicion (None: not at all, e.g. while the broker is
down). Each row sent again is stamped, so it is not sent again before that wait is over. A duplicate
message is harmless: only a queued row can be claimed, once.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from app.services.job_states import JobState
from app.tables import Evaluation, Job

QueuedRow = TypeVar("QueuedRow", Job, Evaluation)


@dataclass(frozen=True)
class Resend:
    """When a queued row counts as having lost its message (see the module docstring)."""

    pending: Collection[str] | None = None  # ids the broker holds a message for; None: it cannot tell
    grace_s: float = 10.0
    timer_s: float | None = None

    @property
    def after_s(self) -> float | None:
        """How long a row must have been queued to be sent again (None: no row is)."""
        return self.grace_s if self.pending is not None else self.timer_s


def stamp_lost(
    session: Session,
    table: type[QueuedRow],
    resend: Resend,
    now: datetime,
    *where: ColumnElement[Any],
) -> list[str]:
    """Ids of the queued rows of `table` (matching `where`) whose message is lost, stamped as enqueued `now`."""
    after = resend.after_s
    if not after:
        return []
    cutoff = now - timedelta(seconds=after)
    waiting = session.scalars(
        select(table)
        .where(table.state == JobState.QUEUED, func.coalesce(table.heartbeat_at, table.created_at) < cutoff, *where)
        .with_for_update(skip_locked=True)
    ).all()
    lost = [row for row in waiting if resend.pending is None or row.id not in resend.pending]
    for row in lost:
        row.heartbeat_at = now
    session.flush()
    return [row.id for row in lost]


__all__ = ["Resend", "stamp_lost"]
