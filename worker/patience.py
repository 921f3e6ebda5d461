"""How a worker waits out a database outage instead of losing work to it.

Before a job is claimed, the task hands its message back to the broker with a growing delay
(`retry_countdown`), so a worker that cannot reach the database never drains the queue. After the
claim, each transaction of the job is tried again with backoff (`with_database`) for as long as the
job stays ours: the reaper only requeues it once its heartbeats are `stale_after_s` old.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from app.db import is_unavailable_error

log = logging.getLogger("neurules.worker")

T = TypeVar("T")
MAX_COUNTDOWN_S = 30.0  # a message waits at most this long between tries: the job starts within it of the return


def retry_countdown(retries: int) -> float:
    """Seconds before the next try of a message whose worker could not reach the database: 1, 2, 4 ... 30."""
    return min(MAX_COUNTDOWN_S, float(2 ** min(retries, 10)))


def with_database(fn: Callable[[], T], *, patience_s: float, what: str, first_delay_s: float = 0.5) -> T:
    """`fn()` (one transaction, safe to repeat), tried again with backoff while the database is unavailable.

    Gives up (raises) once `patience_s` would be over.

    Every write a worker repeats is conditional on the job's state and owner, so a commit that succeeded
    although its answer was lost is not applied twice.
    """
    deadline = time.monotonic() + patience_s
    delay = first_delay_s
    while True:
        try:
            return fn()
        except Exception as e:
            if not is_unavailable_error(e) or time.monotonic() + delay > deadline:
                raise
            log.warning("database unavailable; trying again", extra={"what": what, "retry_in_s": delay})
        time.sleep(delay)
        delay = min(delay * 2, 10.0)
