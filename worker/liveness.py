"""Each training worker's heartbeat row (app/services/workers.py), kept fresh by a thread the worker starts.

`HeartbeatStep` is a Celery bootstep of the worker blueprint, so every worker of the app has it: a
`celery worker` process and the embedded worker thread alike. A clean stop deletes the row; a killed
worker's row goes stale and stops counting after three missed beats.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from celery import bootsteps

from app.db import Database
from app.services import workers
from app.settings import Settings
from app.tables import utcnow

log = logging.getLogger("neurules.worker")

FORGET_AFTER = timedelta(days=1)  # rows of workers killed long ago are pruned at a worker's start


class WorkerBeat:
    """A daemon thread that writes this worker's heartbeat row every `heartbeat_interval_s`."""

    def __init__(self, db: Callable[[], Database], settings: Settings, name: str) -> None:
        self.db, self.settings, self.name = db, settings, name
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="neurules-worker-heartbeat", daemon=True)
        self._failing = False

    def start(self) -> None:
        """Write the first beat at once, then keep beating."""
        self._thread.start()

    def _run(self) -> None:
        self._once(prune=True)
        while not self._stop.wait(self.settings.heartbeat_interval_s):
            self._once()

    def _once(self, *, prune: bool = False) -> None:
        try:
            with self.db().session() as s:
                if prune:
                    workers.prune(s, older_than=utcnow() - FORGET_AFTER)
                workers.beat(
                    s, name=self.name, queue=self.settings.queue, hostname=socket.gethostname(), pid=os.getpid()
                )
        except Exception as e:  # noqa: BLE001 -- the database is away: keep trying, log once per outage
            if not self._failing:
                log.warning("worker heartbeat failed", extra={"worker": self.name, "error": repr(e)})
            self._failing = True
            return
        if self._failing:
            log.info("worker heartbeat written again", extra={"worker": self.name})
        self._failing = False

    def stop(self) -> None:
        """Stop beating and remove the row (the worker leaves cleanly)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        try:
            with self.db().session() as s:
                workers.leave(s, self.name)
        except Exception as e:  # noqa: BLE001 -- the row goes stale on its own
            log.warning("could not remove the worker heartbeat row", extra={"worker": self.name, "error": repr(e)})


def heartbeat_step(db: Callable[[], Database], settings: Settings) -> type[bootsteps.StartStopStep]:
    """A worker bootstep that runs a `WorkerBeat` named `<celery hostname>/<pid>` while the worker runs."""

    class HeartbeatStep(bootsteps.StartStopStep):  # type: ignore[misc]  # celery is untyped
        """Keeps this worker's heartbeat row fresh (see `WorkerBeat`)."""

        label = "neurules-heartbeat"

        def create(self, parent: Any) -> WorkerBeat:
            """The heartbeat of this worker; Celery starts and stops it with the worker."""
            return WorkerBeat(db, settings, f"{parent.hostname}/{os.getpid()}")

    return HeartbeatStep
