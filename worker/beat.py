"""A heartbeat thread for a claimed job or evaluation, and progress writes that a database outage only skips.

The row a worker claimed (a training job, a background evaluation) stays its own while its heartbeat is
fresh; `Beat` refreshes it in the background, even through long steps. While the database is away the
beats fail quietly, and `OfflineAware` skips progress writes for a while instead of failing the work:
the row is the worker's for `NEURULES_STALE_AFTER_S` without heartbeats, and the result is stored with
patience (`worker.patience.with_database`) once the computation ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from app.db import is_unavailable_error

log = logging.getLogger("neurules.worker")

T = TypeVar("T")


class Beat:
    """A daemon thread calling `beat` every `interval` seconds until it returns False or the block ends."""

    def __init__(self, beat: Callable[[], bool], interval: float, name: str) -> None:
        self.beat, self.interval = beat, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if not self.beat():
                    return
            except Exception:
                log.warning("heartbeat failed", extra={"beat": self._thread.name}, exc_info=True)

    def __enter__(self) -> Beat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class OfflineAware:
    """Runs database writes that may be skipped: after one finds the database unavailable, the next ones
    are skipped for `pause_s` seconds (then tried again); any other error is raised."""

    def __init__(self, pause_s: float, what: str, ident: str) -> None:
        self.pause_s, self.what, self.ident = pause_s, what, ident
        self._offline_until = 0.0

    def run(self, write: Callable[[], T]) -> T | None:
        """`write()`, or None when it was skipped or found the database unavailable."""
        now = time.monotonic()
        if now < self._offline_until:
            return None
        try:
            return write()
        except Exception as e:
            if not is_unavailable_error(e):
                raise
            log.warning(f"database unavailable; {self.what} goes on without progress", extra={"id": self.ident})
            self._offline_until = now + self.pause_s
            return None


__all__ = ["Beat", "OfflineAware"]
