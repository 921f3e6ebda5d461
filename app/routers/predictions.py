"""Predictions: JSON records and CSV batch; every decision writes an append-only audit row.

The request path is validation + numpy rule evaluation (models.rulelist) + JSON: the parsed rule
list is cached per immutable version, API keys and aliases for a few seconds, and the only
database round trip on a warm path is the audit insert.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from app.deps import AppState, CurrentTenant, service_state
from app.errors import responses
from app.http.uploads import multipart_body, read_upload
from app.schemas.predictions import PredictionCreate, PredictionList
from app.services import predictions
from app.services.errors import DomainError
from app.services.serving import ServedModel
from app.state import ServiceState

router = APIRouter(prefix="/v1/models", tags=["predictions"])


async def load_model(state: ServiceState, tenant_id: str, ref: str) -> ServedModel:
    """Cached fast path inline; a miss goes to the thread pool."""
    served = state.models.cached(tenant_id, ref)
    if served is not None:
        return served
    return await run_in_threadpool(state.models.load, tenant_id, ref)


@contextmanager
def counted_rejections(state: ServiceState, reason: str) -> Iterator[None]:
    """Count a domain error raised inside as a rejected prediction request (and let it through)."""
    try:
        yield
    except DomainError:
        state.metrics.prediction_errors.labels(reason).inc()
        raise


def count_decisions(state: ServiceState, model: ServedModel, rule_ids: list[int]) -> None:
    """Count returned decisions per model, version and rule (Prometheus)."""
    labels = (model.tenant_id, model.name, model.version)
    state.metrics.count_decisions(model.version_id, labels, len(model.rule_list.rules), rule_ids)


@router.post(
    "/{ref}/predict",
    response_model=PredictionList,
    responses=responses(401, 404, 413, 422, 503),
    summary="Decide records; each answer carries class, probabilities, rule and explanation",
)
async def predict(
    ref: str,
    body: PredictionCreate,
    principal: CurrentTenant,
    request: Request,
    explain: Annotated[bool, Query(description="false: no explanation, whatever the body's `explain` says")] = True,
) -> Response:
    """Validate records against the model's fields, evaluate the rule list, audit, answer."""
    state = service_state(request)  # not a dependency: one less to solve on the hot path
    with counted_rejections(state, "too_many_records"):
        predictions.check_record_count(len(body.records), state.settings.max_records_per_request)
    model = await load_model(state, principal.tenant_id, ref)
    mode = body.explain if explain else "none"
    with counted_rejections(state, "invalid_record"):
        if mode == "counterfactual":  # a search per record: off the event loop
            results = await run_in_threadpool(predictions.decide_records, model, body.records, explain=mode)
        else:
            results = predictions.decide_records(model, body.records, explain=mode)
    await state.audit.write(predictions.audit_rows(principal, model, body.records, results))
    state.metrics.predictions.labels("json").inc(len(results))
    count_decisions(state, model, [r["rule_id"] for r in results])
    payload = {"model_version": model.ref(), "classes": list(model.rule_list.classes), "predictions": results}
    return Response(json.dumps(payload, separators=(",", ":"), default=str), media_type="application/json")


@router.post(
    "/{ref}/predict.csv",
    openapi_extra=multipart_body(
        "CSV with a header naming the model's fields (read like a dataset upload: `;` files with decimal "
        "commas, `.csv.gz`)"
    ),
    responses={
        200: {
            "description": "CSV: index (from 0), prediction, probability, rule_id, p_<class>...",
            "content": {
                "text/csv": {
                    "schema": {"type": "string"},
                    "example": "index,prediction,probability,rule_id,p_0,p_1\n0,1,0.83,2,0.17,0.83\n",
                }
            },
        },
        **responses(401, 404, 413, 415, 422, 503),
    },
    summary="Decide a CSV of records (multipart field 'file')",
)
async def predict_csv(
    ref: str,
    request: Request,
    principal: CurrentTenant,
    state: AppState,
    ignore_extra: Annotated[bool, Query(description="ignore columns the model does not use")] = False,
) -> Response:
    """Batch prediction: CSV in, CSV out, one audit row per row."""
    model = await load_model(state, principal.tenant_id, ref)
    upload = await read_upload(request, state.settings.max_upload_bytes)
    with counted_rejections(state, "invalid_csv"):
        decided = await run_in_threadpool(
            predictions.decide_csv,
            state.db.engine,
            principal,
            model,
            upload.data,
            max_rows=state.settings.max_batch_rows,
            ignore_extra=ignore_extra,
        )
    state.metrics.predictions.labels("csv").inc(len(decided.rule_ids))
    count_decisions(state, model, decided.rule_ids)
    return Response(
        decided.text,
        media_type="text/csv",
        headers={"X-Model-Version": model.version_id, "Content-Disposition": 'attachment; filename="predictions.csv"'},
    )
