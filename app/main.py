"""The FastAPI application factory; `app.main:app` is the ASGI app configured from the environment."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from sqlalchemy import func, select

from app.db import Database
from app.errors import install_error_handlers
from app.observability import Metrics, RequestMetricsMiddleware, configure_logging
from app.routers import audit, datasets, jobs, models, ops, predictions, registry
from app.services.jobs import JobQueue
from app.settings import Settings, get_settings
from app.state import ServiceState
from app.tables import Job

log = logging.getLogger("neurules.app")

DESCRIPTION = """
Learn crisp, human-readable rule lists from CSV data (NeuRules) and serve predictions that say
*why*: the matched rule, its conditions and the record's own values.

Authenticate every `/v1` call with a tenant API key (`X-API-Key: <key>` or
`Authorization: Bearer <key>`); keys are created with `neurules-admin create-key TENANT`.
Errors share one shape: `{"error": {"code", "message", "details": [{"field", "message"}]}}`.

Typical flow: `POST /v1/datasets` (CSV) -> `POST /v1/jobs` -> poll `GET /v1/jobs/{id}` ->
`PUT /v1/registered-models/{name}/aliases/production` -> `POST /v1/models/{name}@production/predict`.

Error codes (a failed request never leaves rows behind):

| status | code | when |
| --- | --- | --- |
| 401 | `missing_api_key`, `invalid_api_key` | no key, or an unknown / revoked one |
| 404 | `not_found` | unknown id, model, alias or version, or one owned by another tenant |
| 409 | `job_finished`, `job_busy`, `dataset_in_use`, `version_conflict` | cancel a finished job; delete a dataset with active jobs |
| 413 | `payload_too_large`, `csv_too_many_rows` | body, file, record count or rows over the configured limits |
| 415 | `unsupported_media_type` | upload not multipart/form-data, or the file part is not CSV |
| 422 | `csv_empty`, `csv_no_rows`, `csv_no_header`, `csv_not_utf8`, `csv_ragged_rows`, `csv_duplicate_columns`, `csv_empty_column_name`, `csv_all_missing_column`, `csv_non_finite`, `csv_malformed`, `csv_too_many_columns` | the CSV (message names line / column) |
| 422 | `target_not_found`, `single_class_target`, `too_many_classes`, `too_few_rows`, `invalid_input` | job parameters (message names the field) |
| 422 | `invalid_record` | a record misses a field, has an unknown one or a value of the wrong type (`records[i].field`) |
| 422 | `invalid_rule_list` | an imported document is malformed (message names the path) |
| 503 | `broker_unavailable`, `audit_unavailable`, `service_unavailable` | a dependency is down; nothing was created / answered |
"""


class BackgroundServices:
    """The reaper thread and (embedded mode) the in-process Celery worker."""

    def __init__(self, state: ServiceState, celery_app: Any | None, run_worker: bool) -> None:
        self.state, self.celery_app, self.run_worker = state, celery_app, run_worker
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._worker: Any = None

    def start(self) -> None:
        """Start the reaper (and the embedded worker, after requeueing what the previous one left running)."""
        if self.run_worker and self.celery_app is not None:
            from worker.embedded import EMBEDDED_HOST
            from worker.tasks import reap_and_requeue

            try:  # one embedded worker per service: jobs its previous incarnation held are orphans now
                reap_and_requeue(
                    self.state.db, self.state.settings, self.celery_app, dead_worker_prefix=f"{EMBEDDED_HOST}/"
                )
            except Exception:
                log.warning("could not requeue the previous embedded worker's jobs", exc_info=True)
        t = threading.Thread(target=self._reaper, name="neurules-reaper", daemon=True)
        t.start()
        self._threads.append(t)
        if self.run_worker and self.celery_app is not None:
            from worker.embedded import start_embedded_worker

            self._worker = start_embedded_worker(self.celery_app, self.state.settings)
            thread = self._worker._neurules_thread  # noqa: SLF001

            def _check() -> None:
                if not thread.is_alive():
                    raise RuntimeError("the embedded training worker thread has stopped")

            self.state.worker_check = _check

    def _reaper(self) -> None:
        from worker.tasks import reap_and_requeue

        while True:
            try:
                reap_and_requeue(self.state.db, self.state.settings, self.celery_app)
            except Exception:
                log.warning("reaper sweep failed", exc_info=True)
            if self._stop.wait(self.state.settings.reaper_interval_s):
                return

    def stop(self) -> None:
        """Stop the background threads."""
        self._stop.set()
        if self._worker is not None:
            from worker.embedded import stop_embedded_worker

            stop_embedded_worker(self._worker)


def create_app(
    settings: Settings | None = None,
    *,
    queue: JobQueue | None = None,
    db: Database | None = None,
    background: bool | None = None,
    configure_logs: bool = True,
) -> FastAPI:
    """Build the API. Tests pass a fake queue; production wires Celery from settings."""
    settings = settings or get_settings()
    if configure_logs:
        configure_logging(settings.log_level)
    db = db or Database(settings.resolved_database_url)
    celery_app = None
    broker_check = None
    if queue is None:
        from worker.celery_app import CeleryQueue, make_celery

        celery_app = make_celery(settings)
        cq = CeleryQueue(celery_app, settings.queue)
        queue, broker_check = cq, cq.check
    state = ServiceState(settings=settings, db=db, queue=queue, broker_check=broker_check)

    def jobs_by_state() -> dict[str, int]:
        """Job counts per state, for the metrics gauge."""
        with db.sessionmaker() as s:
            return {k: v for k, v in s.execute(select(Job.state, func.count()).group_by(Job.state)).all()}

    metrics = Metrics(jobs_by_state)
    state.metrics = metrics
    run_background = background if background is not None else celery_app is not None
    services = BackgroundServices(state, celery_app, settings.run_embedded_worker)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        """Start/stop the background services and release the database."""
        if run_background:
            services.start()
        log.info(
            "service started",
            extra={
                "mode": settings.mode,
                "database": db.engine.url.render_as_string(),
                "embedded_worker": settings.run_embedded_worker and run_background,
            },
        )
        try:
            yield
        finally:
            if run_background:
                services.stop()
            state.audit.close()
            db.dispose()

    app = FastAPI(
        title="NeuRules service",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_tags=[
            {"name": "datasets", "description": "CSV uploads, validated and profiled"},
            {"name": "jobs", "description": "training jobs (Celery); the job row is the source of truth"},
            {"name": "models", "description": "immutable model versions and their exports"},
            {"name": "registered models", "description": "named models and movable aliases"},
            {"name": "predictions", "description": "decisions with explanations; every one audited"},
            {"name": "audit", "description": "the tenant's append-only log of decisions"},
            {"name": "ops", "description": "health, readiness, metrics"},
        ],
    )
    app.state.service = state
    app.state.metrics = metrics
    install_error_handlers(app)
    # predictions first: the hot path matches its route on the first try
    for r in (
        predictions.router,
        datasets.router,
        jobs.router,
        models.router,
        registry.router,
        audit.router,
        ops.router,
    ):
        app.include_router(r)
    app.add_middleware(
        RequestMetricsMiddleware,
        metrics=metrics,
        access_log=settings.access_log,
        max_body=settings.max_upload_bytes + 64 * 1024,
    )
    return app


_app: FastAPI | None = None


def __getattr__(name: str) -> Any:
    """`app.main:app` for `uvicorn app.main:app` (built from the environment on first access)."""
    global _app
    if name == "app":
        if _app is None:
            _app = create_app()
        return _app
    raise AttributeError(name)
