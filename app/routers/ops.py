"""Operations: liveness, readiness (database + broker), Prometheus metrics."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app.deps import AppState

router = APIRouter(tags=["ops"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


def _check_db(state: Any) -> None:
    with state.db.engine.connect() as conn:
        conn.execute(text("SELECT 1"))


@router.get(
    "/readyz",
    summary="Readiness: database and broker reachable",
    responses={503: {"description": "a dependency is down; `checks` says which"}},
)
async def readyz(state: AppState) -> JSONResponse:
    """200 when the database and the broker answer, else 503 naming the failing one."""
    checks: dict[str, str] = {}
    try:
        await run_in_threadpool(_check_db, state)
        checks["database"] = "ok"
    except Exception as e:
        checks["database"] = f"error: {type(e).__name__}: {str(e)[:200]}"
    if state.broker_check is None:
        checks["broker"] = "not configured"
    else:
        try:
            await run_in_threadpool(state.broker_check)
            checks["broker"] = "ok"
        except Exception as e:
            checks["broker"] = f"error: {type(e).__name__}: {str(e)[:200]}"
    if state.worker_check is not None:
        try:
            state.worker_check()
            checks["embedded_worker"] = "ok"
        except Exception as e:
            checks["embedded_worker"] = f"error: {e}"
    ok = all(v in ("ok", "not configured") for v in checks.values())
    return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks}, status_code=200 if ok else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Request latency histogram, predictions counter, jobs by state."""
    metrics = request.app.state.metrics
    registry = metrics.registry
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # several server processes: aggregate their files
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        registry = CollectorRegistry()
        MultiProcessCollector(registry)
        if metrics.jobs_collector is not None:
            registry.register(metrics.jobs_collector)
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
