"""Operations: liveness, readiness (database, broker, training worker), Prometheus metrics."""

from __future__ import annotations

import os
from functools import partial

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from app.deps import AppState
from app.services import readiness

router = APIRouter(tags=["ops"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Readiness: database and broker reachable",
    responses={503: {"description": "a dependency is down; `checks` says which"}},
)
async def readyz(state: AppState) -> JSONResponse:
    """200 when the database and the broker answer (and the embedded worker runs), else 503 naming the failing one."""
    checks = {
        "database": await run_in_threadpool(readiness.run_check, partial(readiness.check_database, state.db)),
        "broker": await run_in_threadpool(readiness.run_check, state.broker_check),
    }
    if state.worker_check is not None:
        checks["embedded_worker"] = readiness.run_check(state.worker_check)
    ok = readiness.is_ready(checks)
    return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks}, status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(state: AppState) -> Response:
    """Request latency histogram, predictions counter, jobs by state."""
    registry = state.metrics.registry
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # several server processes: aggregate their files
        registry = CollectorRegistry()
        MultiProcessCollector(registry)  # type: ignore[no-untyped-call]  # prometheus_client leaves it untyped
        if state.metrics.jobs_collector is not None:
            registry.register(state.metrics.jobs_collector)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
