"""The in-process Celery worker of embedded mode (a solo-pool WorkController in a daemon thread)."""

from __future__ import annotations

import itertools
import logging
import socket
import threading
from dataclasses import dataclass, field

from celery import Celery
from celery.worker import WorkController

from app.settings import Settings
from worker.celery_app import make_broker_folders

log = logging.getLogger("neurules.worker")

EMBEDDED_HOST = f"embedded@{socket.gethostname()}"
# what the embedded worker's jobs are held under, now (`embedded@<host>/<pid>/...`) and before 0b345df named its node
# (`<host>/<pid>/...`, the solo pool's bare host name): a start after an upgrade requeues both at once (an upgrade
# probe saw a job of the older release stay `running` until the reaper's stale timeout)
EMBEDDED_HOLDERS = (f"{EMBEDDED_HOST}/", f"{socket.gethostname()}/")


RESTART_PAUSES_S = (1.0, 2.0, 5.0, 10.0, 30.0)  # between restarts of a worker that stopped on its own


@dataclass
class RunningWorker:
    """An embedded worker's supervising thread, the controller running now, and the flag that stops both."""

    stopping: threading.Event = field(default_factory=threading.Event)
    controller: WorkController | None = None
    thread: threading.Thread = field(init=False)


def _controller(app: Celery, settings: Settings) -> WorkController:
    return WorkController(
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


def start_embedded_worker(app: Celery, settings: Settings) -> RunningWorker:
    """Start a solo-pool worker consuming the training queue inside this process, restarted when it stops on
    its own (Celery ends a worker on an "unrecoverable" error, e.g. its broker folder deleted: jobs were then
    accepted and never trained until the service restarted)."""
    app.finalize()
    running = RunningWorker()
    running.thread = threading.Thread(
        target=_supervise, args=(app, settings, running), name="neurules-embedded-worker", daemon=True
    )
    running.thread.start()
    log.info("embedded worker started", extra={"queue": settings.queue})
    return running


def _supervise(app: Celery, settings: Settings, running: RunningWorker) -> None:
    """The worker thread: this app is its current app (the solo pool looks tasks up in the current app); a
    worker that stops without being asked to is replaced by a new one after a pause."""
    app.set_current()
    for restart in itertools.count():
        if restart:
            pause = RESTART_PAUSES_S[min(restart - 1, len(RESTART_PAUSES_S) - 1)]
            log.error("embedded worker stopped on its own; restarting", extra={"pause_s": pause})
            if running.stopping.wait(pause):
                return
        try:
            make_broker_folders(app)
            running.controller = _controller(app, settings)
            running.controller.start()
        except Exception:  # whatever ended it, the next round starts a new one
            log.exception("embedded worker failed")
        if running.stopping.is_set():
            return


def stop_embedded_worker(worker: RunningWorker, timeout: float = 10.0) -> None:
    """Ask the embedded worker to stop (and not be restarted) and wait a little for it."""
    from celery.worker import state

    worker.stopping.set()
    try:
        if worker.controller is not None:
            worker.controller.stop(in_sighandler=False)
    except Exception:  # noqa: BLE001 -- a worker that cannot stop cleanly is told to terminate
        state.should_terminate = 0
    worker.thread.join(timeout)
