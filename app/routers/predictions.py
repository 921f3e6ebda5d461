"""Predictions: JSON records and CSV batch; every decision writes an append-only audit row.

The request path is validation + numpy rule evaluation (models.rulelist) + JSON: the parsed rule
list is cached per immutable version, API keys and aliases for a few seconds, and the only
database round trip on a warm path is the audit insert.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from sqlalchemy import select

from app.audit import audit_rows, write_rows
from app.deps import AppState, CurrentTenant
from app.errors import APIError, NotFound, PayloadTooLarge, ServiceUnavailable, Unprocessable, responses
from app.routers.datasets import _read_upload
from app.schemas.predictions import PredictionCreate, PredictionList
from app.services import csvdata, registry, serving
from app.state import ServiceState
from app.tables import RegisteredModel

router = APIRouter(prefix="/v1/models", tags=["predictions"])
log = logging.getLogger("neurules.predictions")

CSV_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {
                            "type": "string",
                            "format": "binary",
                            "description": "CSV with a header naming the model's fields",
                        }
                    },
                }
            }
        },
    }
}


def _cached(state: ServiceState, tenant_id: str, ref: str) -> serving.ServedModel | None:
    """The served model from the caches (no I/O), or None on a miss; another tenant's is a 404."""
    r = registry.parse_ref(ref)
    vid = r.version_id or state.alias_cache.get((tenant_id, ref))
    served = state.model_cache.get(vid) if vid is not None else None
    if served is not None and served.tenant_id != tenant_id:
        raise NotFound(f"model version {ref!r} not found")
    return served  # type: ignore[no-any-return]


def _load(state: ServiceState, tenant_id: str, ref: str) -> serving.ServedModel:
    """Resolve a reference to a served model (DB only on cache misses)."""
    served = _cached(state, tenant_id, ref)
    if served is not None:
        return served
    r = registry.parse_ref(ref)
    with state.db.sessionmaker() as s:
        mv = registry.resolve(s, tenant_id, ref)
        name = s.scalar(select(RegisteredModel.name).where(RegisteredModel.id == mv.registered_model_id)) or ""
        served = serving.ServedModel.build(mv.id, mv.tenant_id, name, mv.version, mv.rule_list)
    state.model_cache.put(mv.id, served)
    if r.version_id is None:
        state.alias_cache.put((tenant_id, ref), mv.id)
    return served


async def load_model(state: ServiceState, tenant_id: str, ref: str) -> serving.ServedModel:
    """Cached fast path inline; a miss goes to the thread pool."""
    served = _cached(state, tenant_id, ref)
    if served is not None:
        return served
    return await run_in_threadpool(_load, state, tenant_id, ref)


def _reject(state: ServiceState, reason: str, err: APIError) -> APIError:
    if state.metrics is not None:
        state.metrics.prediction_errors.labels(reason).inc()
    return err


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
    explain: Annotated[bool, Query(description="include the explanation per record")] = True,
) -> Any:
    """Validate records against the model's fields, evaluate the rule list, audit, answer."""
    state: ServiceState = request.app.state.service  # not a dependency: one less to solve on the hot path
    if len(body.records) > state.settings.max_records_per_request:
        raise _reject(
            state,
            "too_many_records",
            PayloadTooLarge(
                f"records: {len(body.records)} records; at most {state.settings.max_records_per_request} per request "
                "(use the CSV batch endpoint for more)"
            ),
        )
    model = await load_model(state, principal.tenant_id, ref)
    try:
        serving.validate_records(model, body.records)
    except serving.RecordError as e:
        raise _reject(
            state, "invalid_record", Unprocessable(e.message, code="invalid_record", details=e.details)
        ) from None
    results = serving.predict_records(model, body.records, explain=explain)
    await state.audit.write(audit_rows(principal.tenant_id, principal.key_id, model.version_id, body.records, results))
    if state.metrics is not None:
        state.metrics.predictions.labels("json").inc(len(results))
    payload = {"model_version": model.ref(), "classes": list(model.rule_list.classes), "predictions": results}
    return Response(json.dumps(payload, separators=(",", ":"), default=str), media_type="application/json")


@router.post(
    "/{ref}/predict.csv",
    openapi_extra=CSV_BODY,
    responses={
        200: {
            "description": "CSV: row, prediction, probability, rule_id, p_<class>...",
            "content": {"text/csv": {"example": "row,prediction,probability,rule_id,p_0,p_1\n1,1,0.83,2,0.17,0.83\n"}},
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
    data, _, _ = await _read_upload(request, state.settings.max_upload_bytes)

    def _run() -> str:
        try:
            table = csvdata.parse_csv(data, max_rows=state.settings.max_batch_rows)
        except csvdata.CSVError as e:
            raise APIError(e.message, code=e.code, status_code=e.status_code) from None
        try:
            records = serving.table_records(model, table, ignore_extra=ignore_extra)
        except serving.RecordError as e:
            raise Unprocessable(e.message, code="invalid_record", details=e.details) from None
        header, rows, _ = serving.batch_csv_rows(model, records)
        results = [
            {"prediction": r[1], "probabilities": dict(zip(model.class_keys, r[4:], strict=True)), "rule_id": r[3]}
            for r in rows
        ]
        try:
            write_rows(
                state.db.engine, audit_rows(principal.tenant_id, principal.key_id, model.version_id, records, results)
            )
        except Exception as e:  # noqa: BLE001 -- no answer without its audit rows (and no 500)
            log.error("audit write failed", extra={"rows": len(records), "error": repr(e)})
            raise ServiceUnavailable(
                "the audit log could not be written; the decisions were not returned", code="audit_unavailable"
            ) from None
        return csvdata.write_csv(header, rows)

    try:
        text = await run_in_threadpool(_run)
    except APIError as e:
        raise _reject(state, "invalid_csv", e) from None
    if state.metrics is not None:
        state.metrics.predictions.labels("csv").inc(text.count("\n") - 1)
    return Response(
        text,
        media_type="text/csv",
        headers={"X-Model-Version": model.version_id, "Content-Disposition": 'attachment; filename="predictions.csv"'},
    )
