"""The composition root: the running service wired from settings (Celery queue, reaper, embedded worker, API).

`uvicorn worker.service:app` serves the API configured from the environment; `neurules-admin serve`
builds one per server process with `build_service`.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from fastapi import FastAPI

from app.admin import expected_schema
from app.db import Database
from app.main import BackgroundService, create_app
from app.settings import Settings, get_settings
from worker import database_lock
from worker.celery_app import CeleryQueue, make_celery
from worker.runtime import EmbeddedWorker, Reaper

log = logging.getLogger("neurules.service")
STARTUP_FAILURE = 3  # uvicorn's exit status for a process that could not start: `uvicorn --workers N` then stops


def build_service(settings: Settings, *, configure_logs: bool = True) -> FastAPI:
    """The API with its real collaborators: Celery for jobs, the reaper and (embedded mode) a worker thread.

    With an embedded worker on a SQLite file, this process takes the database's lock for its lifetime first
    (`worker.database_lock`): `DatabaseInUse` when another process runs an embedded worker on it.
    """
    try:
        sole_worker = settings.run_embedded_worker and database_lock.acquire(settings) is not None
    except database_lock.DatabaseInUse as e:
        if not e.sibling:
            raise
        # `uvicorn worker.service:app --workers N`: a sibling process runs the embedded worker; this one serves the API
        log.warning("the embedded worker runs in sibling pid %s; this process serves the API only", e.holder)
        settings = settings.model_copy(update={"embedded_worker": False})
        sole_worker = False
    db = Database(settings.resolved_database_url, settings.sqlite_synchronous, settings.database_timeouts_ms)
    celery_app = make_celery(settings)
    queue = CeleryQueue(celery_app, settings.queue)
    services: list[BackgroundService] = []
    worker_check = None
    if settings.run_embedded_worker:
        embedded = EmbeddedWorker(db, settings, celery_app, sole_worker=sole_worker)
        services.append(embedded)
        worker_check = embedded.check
    services.append(Reaper(db, settings, celery_app))
    return create_app(
        settings,
        queue=queue,
        db=db,
        broker_check=queue.check,
        worker_check=worker_check,
        schema=expected_schema(),
        background_services=services,
        configure_logs=configure_logs,
    )


_app: FastAPI | None = None


def __getattr__(name: str) -> Any:
    """`worker.service:app`, built from the environment on first access (importing has no side effects)."""
    global _app  # noqa: PLW0603 -- one app per process, built lazily
    if name == "app":
        if _app is None:
            try:
                _app = build_service(get_settings())
            except database_lock.DatabaseInUse as e:  # a traceback and exit 1 would be restarted by --workers N
                print(f"neurules: {e}", file=sys.stderr)
                raise SystemExit(STARTUP_FAILURE) from None
        return _app
    raise AttributeError(name)
