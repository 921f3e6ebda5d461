"""Operations: liveness, readiness (database, broker, training worker), Prometheus metrics."""

from __future__ import annotations

import hmac
import os
from functools import partial

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from app.deps import AppState, bearer_token
from app.services import readiness
from app.services.errors import Unauthenticated

router = APIRouter(tags=["ops"])  # lenient query: probes and scrapers add parameters (cache busters, params:)


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Whether an `Authorization` header is `Bearer <token>` (scheme in any case; compared in constant time)."""
    given = bearer_token(authorization)
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


HEALTHZ_RULE = """**Alive (200, `status: ok`)** while the process serves requests and can still audit a decision.

**503** (`status: failed`, `checks.audit` saying why) once a sync of the embedded audit log failed: from then on
the process refuses every decision until it is restarted (docs/audit.md), so a liveness probe (Kubernetes, a
supervisor acting on the Docker health status) restarts it instead of leaving it refusing. Dependencies that come
back on their own (database, broker, workers) are `/readyz`'s, never this probe's.
"""


@router.get(
    "/healthz",
    summary="Liveness: the process answers and can still audit a decision",
    description=HEALTHZ_RULE,
    responses={503: {"description": "only a restart recovers this process; `checks.audit` says why"}},
)
async def healthz(state: AppState) -> JSONResponse:
    """200 while alive; 503 once only a restart recovers the process (a failed sync of the audit log)."""
    audit = readiness.run_check(state.audit.check)
    if audit == readiness.OK:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "failed", "checks": {"audit": audit}}, status_code=503)


READYZ_RULE = """Each dependency on its own, plus the live training workers.

- `checks.database`: `SELECT 1` answers and the schema is migrated at least as far as this service needs
  (else an error saying to run `neurules-admin migrate`), and in embedded mode its disk has room and its folder
  takes a new file (a disk full or turned read-only is named); `checks.broker`: the job broker accepts a connection;
  `checks.embedded_worker` (embedded mode): the in-process worker thread runs;
- `checks.workers` and `workers.live`: training workers whose heartbeat row is younger than three
  heartbeat intervals (`NEURULES_HEARTBEAT_INTERVAL_S`, default 5 s).

**Ready (200)** when the database and the broker answer, the audit log can be made durable (in embedded mode a
failed sync of its log stops all decisions until a restart), the embedded worker (if any) runs and at least
`workers.required` workers are live; otherwise **503** with `status: unavailable` and the failing check.
`workers.required` is `NEURULES_READY_MIN_WORKERS`, by default 1 in embedded mode (the worker thread is
part of this process) and 0 in distributed mode: an API process serves predictions without any training
worker, so a worker fleet scaled to zero must not take it out of its load balancer. No live worker is
then reported as `workers.live: 0` with a warning (jobs wait queued), not as unready.
"""


@router.get(
    "/readyz",
    summary="Readiness: database, broker and live training workers, each reported",
    description=READYZ_RULE,
    responses={503: {"description": "a dependency is down; `checks` says which"}},
)
async def readyz(state: AppState) -> JSONResponse:
    """200 when ready (see the rule in the description), else 503 naming the failing check."""
    s = state.settings
    checks = {
        "database": await run_in_threadpool(
            readiness.run_check, partial(readiness.check_database, state.db, state.schema)
        ),
        "broker": await run_in_threadpool(readiness.run_check, state.broker_check),
        "audit": readiness.run_check(state.audit.check),  # a failed sync of the log: only a restart recovers
    }
    if state.worker_check is not None:
        checks["embedded_worker"] = readiness.run_check(state.worker_check)
    count = await run_in_threadpool(
        partial(readiness.count_workers, within_s=s.worker_alive_s, required=s.required_workers), state.db, s.queue
    )
    checks["workers"] = readiness.workers_result(count)
    ok = readiness.is_ready(checks)
    body = {
        "status": "ok" if ok else "unavailable",
        "checks": checks,
        "workers": {"live": count.live, "required": count.required},
    }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    description="Request latency histogram, decisions per tenant, model, version and rule, jobs by state. With "
    "`NEURULES_METRICS_TOKEN` set, only a request with `Authorization: Bearer <that token>` is answered (else 401 "
    "`metrics_token`): the labels name every tenant's models.",
    responses={401: {"description": "NEURULES_METRICS_TOKEN is set and the request does not carry it"}},
)
def metrics(state: AppState, request: Request) -> Response:
    """Request latency histogram, predictions counter, jobs by state (behind the metrics token, when one is set)."""
    token = state.settings.metrics_token  # the header read from the request: as a parameter it documented a 422
    if token is not None and not bearer_matches(request.headers.get("authorization"), token.get_secret_value()):
        raise Unauthenticated(
            "/metrics needs `Authorization: Bearer <NEURULES_METRICS_TOKEN>` (missing or wrong)", code="metrics_token"
        )
    registry = state.metrics.registry
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # several server processes: aggregate their files
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it untyped
        if state.metrics.jobs_collector is not None:
            registry.register(state.metrics.jobs_collector)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
