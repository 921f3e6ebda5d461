"""The FastAPI application factory: the API built from the collaborators it is given.

`app` never imports `worker`: the composition root (`worker.service`) builds the Celery queue, the
reaper and the embedded worker and hands them in; tests hand in fakes.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Protocol

from fastapi import FastAPI

from app.db import Database
from app.errors import install_error_handlers, responses
from app.http.head import HeadAsGetMiddleware
from app.http.hot_route import HotRouteMiddleware
from app.observability import Metrics, RequestMetricsMiddleware, configure_logging, fastapi_telemetry
from app.openapi import install_openapi, operation_id
from app.routers import (
    audit,
    comparisons,
    datasets,
    evaluations,
    keys,
    models,
    monitoring,
    ops,
    predictions,
    registry,
)
from app.routers import jobs as jobs_router
from app.services import jobs
from app.services.job_states import JobState
from app.services.jobs import JobQueue
from app.services.readiness import Check, ExpectedSchema
from app.settings import Settings
from app.state import ServiceState
from app.web import install_web

log = logging.getLogger("neurules.app")

DESCRIPTION = """
Learn crisp, human-readable rule lists from CSV data (NeuRules) and serve predictions that say
*why*: the matched rule, its conditions and the record's own values.

Authenticate every `/v1` call with a tenant API key (`X-API-Key: <key>` or
`Authorization: Bearer <key>`); keys are created with `neurules-admin create-key TENANT`.
Errors share one shape, the `Error` schema: `{"error": {"code", "message", "details": [{"field", "message"}]}}`;
`message` names the field in plain words (`parameters.options.lr: must be a number`).

Typical flow: `POST /v1/datasets` (CSV) -> `POST /v1/jobs` -> poll `GET /v1/jobs/{id}` ->
`PUT /v1/registered-models/{name}/aliases/production` -> `POST /v1/models/{name}@production/predict`.

CSV uploads (datasets and `predict.csv`): UTF-8 with a header line, separated by `,`, `;`, tab or `|`; in a
file not separated by commas, decimal commas (`3,5`) are numbers. A gzip-compressed file (`.csv.gz`, or the
body sent with `Content-Encoding: gzip`) is decompressed; the size limit applies to the decompressed bytes.

Decisions are numbered and named alike everywhere: `index` (from 0, the record's position as in
`records[i]`; in a CSV, data row i), `prediction`, `probability` (of the predicted class), `rule_id` (1..k,
0 for the default rule) and the class probabilities (`probabilities` in JSON, `p_<class>` columns in CSV,
as `neurules predict` writes them); each decision's `audit_seq` (its audit record, `GET /v1/audit?seq=`) is a
field in JSON and predict.csv's last column.

Operation ids are `<resource>_<action>` (`datasets_create`, `jobs_get`, `models_predict_csv`).

Error codes (a failed request never leaves rows behind):

| status | code | when |
| --- | --- | --- |
| 400 | `malformed_multipart`, `client_disconnected` | a multipart body that cannot be parsed; a body the client hung up on before it all arrived (seen only in the access log and metrics: nobody reads that answer) |
| 401 | `missing_api_key`, `invalid_api_key`, `ambiguous_api_key` | no key, or an unknown / revoked one (spaces around the key are ignored; with both `X-API-Key` and `Authorization: Bearer`, `X-API-Key` is the key), or two `X-API-Key` (or two Bearer) headers with different keys |
| 401 | `metrics_token` | `/metrics` without `Authorization: Bearer <NEURULES_METRICS_TOKEN>` when that setting is set |
| 404 | `not_found` | unknown id, model, alias or version, or one owned by another tenant |
| 405 | `method_not_allowed` | a method the path does not have; `Allow` lists those it has (HEAD is answered wherever GET is: the GET's status and headers, no body) |
| 403 | `key_scope` | a key of scope `predict` (`neurules-admin create-key --scope predict`) used for anything but `POST /v1/models/{ref}/predict` and `/predict.csv`, or of scope `read` for anything but GET and HEAD; nothing was done |
| 409 | `job_finished`, `job_busy`, `dataset_in_use`, `version_conflict`, `alias_conflict`, `alias_case_conflict`, `registry_chain_broken`, `alias_state_mismatch` | cancel a finished job; delete a dataset with active jobs; an alias created and deleted by other requests throughout a PUT (try again); a new alias differing only in case from one the model has; a model whose registry event chain was changed outside the service (its head moved): nothing is changed until it is repaired (`verify-audit` names where); an alias pointing at another model's version (changed in the database): nothing decided |
| 413 | `payload_too_large`, `csv_too_many_rows` | body, file (decompressed), record count or rows over the configured limits |
| 415 | `unsupported_media_type` | upload not multipart/form-data, the file part is not CSV, or a `Content-Encoding` other than gzip (x-gzip) |
| 422 | `csv_empty`, `csv_no_rows`, `csv_no_header`, `csv_not_utf8`, `csv_nul_byte`, `csv_bad_gzip`, `csv_ragged_rows`, `csv_duplicate_columns`, `csv_empty_column_name`, `csv_all_missing_column`, `csv_non_finite`, `csv_mixed_decimal_separators`, `csv_thousands_separator`, `csv_malformed`, `csv_too_many_columns` | the CSV (message names line / column) |
| 422 | `invalid_input` | a parameter or body field (message names it); a query parameter the operation does not take (`query.<name>`: a misspelt filter is refused, never ignored); a JSON body that cannot be read (too deeply nested, a number over 4300 digits, not UTF-8); a path segment holding an encoded `/` (`%2F`), which no name, alias or id contains |
| 422 | `target_not_found`, `single_class_target`, `too_many_classes`, `too_few_rows`, `too_many_levels`, `training_input_too_large` | job parameters (message names the field; the last two: a categorical feature over `NEURULES_MAX_CATEGORY_LEVELS` values, rows x learner inputs over `NEURULES_MAX_ENCODED_CELLS`) |
| 422 | `target_not_found`, `target_is_a_feature`, `missing_columns`, `column_not_found`, `invalid_values`, `no_rows_to_score`, `too_few_rows_to_score` (evaluations: a comparison answers without metrics and says why, `metrics_withheld`) | an evaluation's or comparison's dataset (the field: `target`, `dataset_id`, `slice_by`, `line N.column`) |
| 422 | `target_differs` | a job or an imported version predicting another target than the model's versions (field `target` / `rule_list.target`): a model predicts one target |
| 422 | `targets_differ` | a comparison of two versions predicting different targets (field `other`) |
| 422 | `dataset_too_large_to_compare` | a comparison's dataset over `NEURULES_EVALUATION_SYNC_MAX_ROWS` rows (field `dataset_id`): evaluate each version in the background instead |
| 422 | `invalid_record` | a record misses a field, has an unknown one or a value of the wrong type (`records[i].field`) |
| 422 | `invalid_rule_list` | an imported document is malformed (message names the path) |
| 503 | `database_unavailable`, `broker_unavailable`, `audit_unavailable`, `temporary_storage_unavailable` (an upload, a CSV's checked columns or an HTTP/1.0 predict.csv answer found no room on the server's disk) | a dependency is down; nothing was created / answered (an HTTP/1.0 predict.csv answer says how many of its rows were decided and audited before); retry after `Retry-After` seconds |
"""  # noqa: E501


class BackgroundService(Protocol):
    """Something that runs beside the API for the process's lifetime (the reaper, an embedded worker)."""

    def start(self) -> None:
        """Start (called once the application starts up)."""
        ...

    def stop(self) -> None:
        """Stop (called when the application shuts down)."""
        ...


# predictions first: the hot path matches its route on the first try
ROUTERS = (
    predictions.router,
    datasets.router,
    jobs_router.router,
    models.router,
    evaluations.router,
    comparisons.router,
    monitoring.router,
    registry.router,
    audit.router,
    keys.router,
    ops.router,
)
OPENAPI_TAGS = [
    {"name": "datasets", "description": "CSV uploads, validated and profiled"},
    {"name": "jobs", "description": "training jobs (Celery); the job row is the source of truth"},
    {"name": "models", "description": "immutable model versions and their exports"},
    {"name": "evaluations", "description": "a version scored on a labelled dataset (stored, immutable)"},
    {"name": "comparisons", "description": "two versions side by side: rules, and predictions on a dataset"},
    {"name": "monitoring", "description": "live decisions per rule and version from the audit trail, drift"},
    {"name": "registered models", "description": "named models, movable aliases and their events"},
    {"name": "predictions", "description": "decisions with explanations; every one audited"},
    {"name": "audit", "description": "the tenant's append-only log of decisions"},
    {"name": "keys", "description": "the tenant's API keys: who an `api_key_id` is (labels; never the keys)"},
    {"name": "ops", "description": "health, readiness, metrics"},
]


def _lifespan(
    state: ServiceState, background_services: Sequence[BackgroundService]
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start the background services with the application, stop them and release the database after it."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        for service in background_services:
            service.start()
        log.info(
            "service started",
            extra={
                "mode": state.settings.mode,
                "database": state.db.engine.url.render_as_string(),
                "embedded_worker": state.worker_check is not None,
            },
        )
        try:
            yield
        finally:
            for service in reversed(background_services):
                service.stop()
            state.audit.close()
            state.db.dispose()

    return lifespan


def _jobs_by_state(database: Database) -> dict[JobState, int]:
    """Job counts per state, for the metrics gauge."""
    with database.sessionmaker() as s:
        return jobs.count_by_state(s)


def create_app(
    settings: Settings,
    *,
    queue: JobQueue,
    db: Database | None = None,
    broker_check: Check | None = None,
    worker_check: Check | None = None,
    schema: ExpectedSchema | None = None,
    background_services: Sequence[BackgroundService] = (),
    configure_logs: bool = True,
) -> FastAPI:
    """Build the API from its collaborators (the composition root, `worker.service`, wires the real ones)."""
    if configure_logs:
        configure_logging(settings.log_level)
    database = db or Database(
        settings.resolved_database_url, settings.sqlite_synchronous, settings.database_timeouts_ms
    )
    metrics = Metrics(partial(_jobs_by_state, database))
    state = ServiceState(
        settings, database, queue, metrics, broker_check=broker_check, worker_check=worker_check, schema=schema
    )
    app = FastAPI(
        title="NeuRules service",
        version="1.0.0",
        description=DESCRIPTION,
        lifespan=_lifespan(state, background_services),
        docs_url=None,  # /docs and /redoc are served from local assets by app.web
        redoc_url=None,
        openapi_tags=OPENAPI_TAGS,
        generate_unique_id_function=operation_id,
        telemetry=fastapi_telemetry(settings.opentelemetry),
    )
    app.state.service = state
    install_error_handlers(app)
    install_openapi(app)
    for router in ROUTERS:
        # every /v1 operation needs the database (an uncached API key is looked up there): each can answer 503
        app.include_router(router, responses=responses(503) if router is not ops.router else None)
    install_web(app)
    app.add_middleware(HeadAsGetMiddleware)  # inside the metrics: they count a HEAD as HEAD
    app.add_middleware(HotRouteMiddleware, fastapi_app=app, routes=predictions.hot_routes())  # inside the metrics
    app.add_middleware(
        RequestMetricsMiddleware,
        metrics=metrics,
        access_log=settings.access_log,
        max_body=settings.max_upload_bytes + 64 * 1024,
    )
    return app
