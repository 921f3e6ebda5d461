"""Predictions: JSON records and CSV batch; every decision writes an append-only audit row.

The request path is validation + rule evaluation (models.rulelist) + JSON + the audit row: the
parsed rule list is cached per immutable version, API keys and aliases within their bounds
(renewed in the background), and the only database round trip on a warm path is the audit
insert, shared by the requests of one loop tick. The CSV batch streams chunk by chunk, each
chunk's audit rows committed before its rows are sent (docs/architecture.md).
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import AsyncIterator
from typing import IO, Annotated

from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response, StreamingResponse
from fastapi.routing import APIRoute

from app.deps import AppState, CurrentTenant, authenticate, service_state
from app.errors import responses
from app.http.hot_route import Handler
from app.http.jsonbody import json_bytes
from app.http.lean_route import LeanRoute
from app.http.uploads import multipart_body, upload_stream
from app.observability import AnswerCutShort
from app.schemas.predictions import PredictionCreate, PredictionList
from app.services import key_scopes, predictions, reviews
from app.services.auth import Principal
from app.services.errors import DomainError, Unauthenticated, Unavailable
from app.services.serving import ServedModel
from app.state import ServiceState

log = logging.getLogger("neurules.predictions")
CLIENT_GONE = 499  # the status logged for a request whose client left before its answer (as nginx logs it)
SPOOL_MEMORY_BYTES = 8 * 1024**2  # an HTTP/1.0 predict.csv answer beyond this waits in a temporary file
SPOOL_READ_BYTES = 1024**2
router = APIRouter(prefix="/v1/models", tags=["predictions"], route_class=LeanRoute)  # see app.http.lean_route


async def load_model(state: ServiceState, principal: Principal, ref: str) -> ServedModel:
    """The served model: from the caches, a miss loaded in a thread (never on the event loop); under the tenant's
    approval policy a `predict` key (a backend's) only through an alias (`reviews.check_decision_ref`); a person's
    `full` key tries records on any version (the console's "Try a record" before an approval)."""
    if principal.require_approval and principal.scope == key_scopes.PREDICT:
        reviews.check_decision_ref(ref)
    return await state.models.get(principal.tenant_id, ref)


class counted_rejections:
    """Count a domain error raised inside as a rejected prediction request (and let it through)."""

    __slots__ = ("counter",)

    def __init__(self, state: ServiceState, reason: str) -> None:
        self.counter = state.metrics.rejection(reason)

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is not None and issubclass(kind, DomainError):
            self.counter.inc()


def count_decisions(state: ServiceState, model: ServedModel, rule_ids: list[int]) -> None:
    """Count returned decisions per model, version and rule (Prometheus)."""
    labels = (model.tenant_id, model.name, model.version)
    state.metrics.count_decisions(model.version_id, labels, len(model.rule_list.rules), rule_ids)


@router.post(
    "/{ref}/predict",
    response_model=PredictionList,
    responses=responses(401, 403, 404, 413, 422, 503),
    summary="Decide records; each answer carries class, probabilities, rule and explanation",
)
async def predict(
    ref: str,
    body: PredictionCreate,
    principal: CurrentTenant,
    request: Request,
    explain: Annotated[
        bool | None,
        Query(
            description="false: no explanation (the body's `explain` \"none\"); true: an explanation (the body's "
            'mode, "rules" by default). Contradicting the body\'s `explain` is a 422 `conflicting_explain`'
        ),
    ] = None,
) -> Response:
    """Validate records against the model's fields, evaluate the rule list, audit, answer."""
    state = service_state(request)  # not a dependency: one less to solve on the hot path
    with counted_rejections(state, "conflicting_explain"):
        mode = predictions.explain_mode(body.explain, "explain" in body.model_fields_set, explain)
    with counted_rejections(state, "too_many_records"):
        predictions.check_record_count(len(body.records), state.settings.max_records_per_request)
    model = await load_model(state, principal, ref)
    with counted_rejections(state, "invalid_record"):
        if mode == "counterfactual":  # a search per record: off the event loop
            results = await run_in_threadpool(predictions.decide_records, model, body.records, explain=mode)
        else:
            results = predictions.decide_records(model, body.records, explain=mode)
    seqs = await state.audit.write(predictions.audit_rows(principal, model, body.records, results))
    for result, seq in zip(results, seqs, strict=True):
        result["audit_seq"] = seq
    state.metrics.decided("json").inc(len(results))
    count_decisions(state, model, [r["rule_id"] for r in results])
    payload = {"model_version": model.ref(), "classes": list(model.rule_list.classes), "predictions": results}
    return Response(json_bytes(payload), media_type="application/json")


@router.post(
    "/{ref}/predict.csv",
    openapi_extra=multipart_body(
        "CSV with a header naming the model's fields (read like a dataset upload: `;` files with decimal "
        "commas, `.csv.gz`)"
    ),
    responses={
        200: {
            "description": "CSV: index (from 0), prediction, probability, rule_id, p_<class>..., audit_seq (the "
            "row's audit record: `GET /v1/audit?seq=`)",
            "content": {
                "text/csv": {
                    "schema": {"type": "string"},
                    "example": "index,prediction,probability,rule_id,p_0,p_1,audit_seq\n0,1,0.83,2,0.17,0.83,318\n",
                }
            },
        },
        **responses(401, 403, 404, 413, 415, 422, 503),
    },
    summary="Decide a CSV of records (multipart field 'file')",
)
async def predict_csv(
    ref: str,
    request: Request,
    principal: CurrentTenant,
    state: AppState,
    ignore_extra: Annotated[
        bool, Query(description="ignore columns the model does not use (and unnamed ones, as a trailing comma makes)")
    ] = False,
) -> Response:
    """Batch prediction: CSV in, CSV out (streamed), one audit row per row, each committed before its row is sent."""
    model = await load_model(state, principal, ref)  # a 401, 403 or 404 before the upload is read
    async with upload_stream(request, state.settings.max_upload_bytes) as upload:
        # the key and the alias again, as they are once the upload is in: a slow upload was decided, minutes
        # later, with a key revoked and by a version its alias had left while it arrived
        principal = await authenticate(request)
        model = await load_model(state, principal, ref)
        with counted_rejections(state, "invalid_csv"):
            batch = await run_in_threadpool(
                predictions.CsvBatch.check,
                state.db.engine,
                principal,
                model,
                upload,
                max_rows=state.settings.max_batch_rows,
                ignore_extra=ignore_extra,
            )
    try:  # the first chunk is audited before the answer starts, so a database down at the start is a clean 503
        first = await _next_chunk(request, batch)  # the key again after the file's check (seconds for a large one)
    except BaseException:
        batch.close()
        raise
    headers = {"X-Model-Version": model.version_id, "Content-Disposition": 'attachment; filename="predictions.csv"'}
    if request.scope.get("http_version") == "1.0":  # no chunked transfer coding there: the whole answer, sized
        spool = await _spooled_answer(request, state, model, batch, first)
        if spool is None:  # the client went away: nobody to answer (nginx's 'client closed request')
            return Response(status_code=CLIENT_GONE)
        headers["Content-Length"] = str(spool.tell())
        spool.seek(0)
        return StreamingResponse(_spool_pieces(spool), media_type="text/csv", headers=headers)
    answer = _answer_rows(request, state, model, batch, first)
    return StreamingResponse(answer, media_type="text/csv", headers=headers)


async def _spooled_answer(
    request: Request,
    state: ServiceState,
    model: ServedModel,
    batch: predictions.CsvBatch,
    first: predictions.CsvDecisions | None,
) -> IO[bytes] | None:
    """The whole answer of an HTTP/1.0 request, every chunk decided and audited, in memory up to SPOOL_MEMORY_BYTES
    and then in a temporary file; None when the client went away meanwhile (no further chunk is decided).

    HTTP/1.0 has no chunked transfer coding, and the server chunks a response of unknown length all the same:
    such a client read the chunk sizes as lines of the CSV. Sized instead, the answer starts only once every row
    is audited, so an audit store lost midway is a clean 503 (the rows audited before it are decisions the
    client never got, as for a client that hangs up: both are logged with their count)."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY_BYTES)  # noqa: SIM115 -- closed by _spool_pieces
    audited = len(first.rule_ids) if first is not None else 0
    try:
        await _spool_write(spool, batch.header().encode())
        chunk = first
        while chunk is not None:
            _count_chunk(state, model, chunk)
            await _spool_write(spool, chunk.text.encode())
            if await request.is_disconnected():
                _log_abandoned(model, 0, audited)
                spool.close()
                return None
            chunk = await _next_chunk(request, batch)
            audited += len(chunk.rule_ids) if chunk is not None else 0
    except BaseException as e:
        spool.close()
        if isinstance(e, Exception):
            _log_cut_short(model, 0, audited, e)
        if isinstance(e, Unavailable) and audited:  # the client should know before it retries the whole file
            raise Unavailable(
                f"{e.message}; the first {audited} row{'s' if audited > 1 else ''} of the file had been decided and "
                "audited already (GET /v1/audit lists them): a retry decides them again",
                dependency=e.dependency,
                code=e.code,
            ) from None
        raise
    finally:
        batch.close()
    return spool


async def _spool_write(spool: IO[bytes], data: bytes) -> None:
    """Add to the spool off the event loop; a temporary storage that is full or failing is a 503 naming it."""
    try:
        await run_in_threadpool(spool.write, data)
    except OSError as e:
        log.error("predict.csv: the HTTP/1.0 answer could not be spooled", extra={"error": str(e)})  # the path
        raise Unavailable(
            f"the answer could not be held in the server's temporary storage ({e.strerror or type(e).__name__}); "
            "retry later, or over HTTP/1.1, which streams the answer",
            dependency="temporary_storage",
        ) from None


async def _spool_pieces(spool: IO[bytes]) -> AsyncIterator[bytes]:
    """The spooled answer in pieces read off the event loop; the spool closed at the end or when the client goes."""
    try:
        while piece := await run_in_threadpool(spool.read, SPOOL_READ_BYTES):
            yield piece
    finally:
        spool.close()


async def _answer_rows(
    request: Request,
    state: ServiceState,
    model: ServedModel,
    batch: predictions.CsvBatch,
    first: predictions.CsvDecisions | None,
) -> AsyncIterator[str]:
    """The header, then each chunk once its audit rows are committed.

    A failure after the answer started (the audit store gone mid-file) cannot change the status any
    more: the stream is aborted without its last chunk, so the client sees a truncated transfer (every
    row it did receive was decided and audited; the rest were not decided), and the cut is logged. A client
    that goes away mid-answer is logged too, with the rows decided and audited by then: the audit holds
    decisions that client may never have read. The key is checked again before each chunk (through the key
    cache, so within its bound): a key revoked while the answer streams decides no further row. The version
    stays the one the answer started with (`X-Model-Version`): one file, one version."""
    chunk = first
    sent, audited = 0, len(first.rule_ids) if first is not None else 0
    ended = False
    try:
        yield batch.header()
        while chunk is not None:
            _count_chunk(state, model, chunk)
            yield chunk.text
            sent += len(chunk.rule_ids)
            chunk = await _next_chunk(request, batch)
            audited += len(chunk.rule_ids) if chunk is not None else 0
        ended = True
    except Exception as e:
        ended = True
        code = _log_cut_short(model, sent, audited, e)
        # not the domain error itself: its handler would try to answer a response already started
        raise AnswerCutShort(f"predict.csv cut short after {sent} rows ({code})") from e
    finally:
        if not ended:  # cancelled: the client hung up (or the server is stopping) before the last row
            _log_abandoned(model, sent, audited)
        batch.close()


async def _next_chunk(request: Request, batch: predictions.CsvBatch) -> predictions.CsvDecisions | None:
    """The next chunk decided and audited, once the request's key is found valid again (through the key cache, so
    within its bound): a key revoked while a file is decided decides no further chunk."""
    await authenticate(request)
    return await run_in_threadpool(batch.next_chunk)


def _count_chunk(state: ServiceState, model: ServedModel, chunk: predictions.CsvDecisions) -> None:
    """Count a chunk's decisions in the metrics (in total and per rule)."""
    state.metrics.decided("csv").inc(len(chunk.rule_ids))
    count_decisions(state, model, chunk.rule_ids)


def _log_abandoned(model: ServedModel, sent: int, audited: int) -> None:
    """Log an answer whose client went away: the audit holds `audited` decisions, of which it got `sent`."""
    extra = {"rows_sent": sent, "rows_audited": audited, "model_version": model.version_id}
    log.warning("predict.csv answer abandoned: the client went away before the last row", extra=extra)


def _log_cut_short(model: ServedModel, sent: int, audited: int, err: Exception) -> str:
    """Log an answer a failure cut short (no row after the `audited` ones was decided); the failure's code."""
    code = err.code if isinstance(err, DomainError) else "internal_error"
    extra = {"rows_sent": sent, "rows_audited": audited, "error_code": code, "model_version": model.version_id}
    if isinstance(err, Unauthenticated):  # a key revoked while its answer streamed: an operator's routine act
        log.warning("predict.csv stopped: its key was revoked; no row after those audited was decided", extra=extra)
    else:
        log.error("predict.csv cut short: no row after those audited was decided", extra=extra)
    return code


def hot_routes() -> list[tuple[APIRoute, Handler]]:
    """The routes worth a direct dispatch (`app.http.hot_route`) with their lean handlers: one-record prediction."""
    out: list[tuple[APIRoute, Handler]] = []
    for route in router.routes:
        if isinstance(route, LeanRoute) and route.endpoint is predict:
            handler = route.lean_handler()
            if handler is None:  # its parameters changed: FastAPI's solver needs its own request_response
                raise RuntimeError(f"{route.path} has no lean handler: it cannot be dispatched directly")
            out.append((route, handler))
    return out
