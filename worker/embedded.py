"""The in-process Celery worker of embedded mode (a solo-pool WorkController in a daemon thread)."""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

from celery import Celery

from app.settings import Settings

log = logging.getLogger("neurules.worker")

EMBEDDED_HOST = f"embedded@{socket.gethostname()}"


def start_embedded_worker(app: Celery, settings: Settings) -> Any:
    """Start a solo-pool worker consuming the training queue inside this process."""
    from celery.worker import WorkController

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
    t = threading.Thread(target=worker.start, name="neurules-embedded-worker", daemon=True)
    t.start()
    worker._neurules_thread = t  # noqa: SLF001
    log.info("embedded worker started", extra={"queue": settings.queue})
    return worker


def stop_embedded_worker(worker: Any, timeout: float = 10.0) -> None:
    """Ask the embedded worker to stop and wait a little for it."""
    from celery.worker import state

    try:
        worker.stop(in_sighandler=False)
    except Exception:
        state.should_terminate = 0
    t: threading.Thread | None = getattr(worker, "_neurules_thread", None)
    if t is not None:
        t.join(timeout)
