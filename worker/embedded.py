"""The in-process Celery worker of embedded mode (a solo-pool WorkController in a daemon thread)."""

from __future__ import annotations

import logging
import socket
import threading
from dataclasses import dataclass

from celery import Celery
from celery.worker import WorkController

from app.settings import Settings

log = logging.getLogger("neurules.worker")

EMBEDDED_HOST = f"embedded@{socket.gethostname()}"


@dataclass(frozen=True)
class RunningWorker:
    """An embedded worker and the thread it runs in."""

    controller: WorkController
    thread: threading.Thread


def start_embedded_worker(app: Celery, settings: Settings) -> RunningWorker:
    """Start a solo-pool worker consuming the training queue inside this process."""
    app.finalize()
    worker = WorkController(
        app=app,
        hostname=EMBEDDED_HOST,
        pool_cls="solo",
        concurrency=1,
        loglevel=settings.log_level,
        queues=[settings.queue],
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        ready_callback=None,
    )
    t = threading.Thread(target=_run, args=(app, worker), name="neurules-embedded-worker", daemon=True)
    t.start()
    log.info("embedded worker started", extra={"queue": settings.queue})
    return RunningWorker(worker, t)


def _run(app: Celery, worker: WorkController) -> None:
    """The worker thread: this app is its current app (the solo pool looks tasks up in the current app)."""
    app.set_current()
    worker.start()


def stop_embedded_worker(worker: RunningWorker, timeout: float = 10.0) -> None:
    """Ask the embedded worker to stop and wait a little for it."""
    from celery.worker import state

    try:
        worker.controller.stop(in_sighandler=False)
    except Exception:  # noqa: BLE001 -- a worker that cannot stop cleanly is told to terminate
        state.should_terminate = 0
    worker.thread.join(timeout)
