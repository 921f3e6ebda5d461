"""Datasets: CSV upload (multipart), list, get, delete."""

from __future__ import annotations

from pathlib import PurePath
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import func, select
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import APIError, Conflict, NotFound, PayloadTooLarge, Unprocessable, UnsupportedMediaType, responses
from app.schemas.datasets import DatasetList, DatasetPublic
from app.services import csvdata
from app.storage import DatabaseBlobStore
from app.tables import Dataset, Job, new_id

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

ACCEPTED_TYPES = {
    "text/csv",
    "application/csv",
    "text/plain",
    "application/vnd.ms-excel",
    "application/octet-stream",
    "text/x-csv",
    "application/x-csv",
    "text/comma-separated-values",
}
MULTIPART_OVERHEAD = 64 * 1024

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary", "description": "the CSV (UTF-8, header line)"},
                        "name": {"type": "string", "description": "dataset name (default: file name stem)"},
                    },
                }
            }
        },
    }
}


def get_dataset(session: Any, tenant_id: str, dataset_id: str) -> Dataset:
    """The tenant's dataset or 404."""
    ds = session.get(Dataset, dataset_id)
    if ds is None or ds.tenant_id != tenant_id:
        raise NotFound(f"dataset {dataset_id!r} not found")
    return ds


async def _read_upload(request: Request, limit: int) -> tuple[bytes, str, str | None]:
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        raise UnsupportedMediaType(
            f"send the CSV as multipart/form-data with a 'file' part (got content type {ctype or 'none'!r})"
        )
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + MULTIPART_OVERHEAD:
        raise PayloadTooLarge(f"upload is {int(length)} bytes; the limit is {limit} bytes")
    try:
        form = await request.form(max_files=1, max_fields=10)
    except StarletteHTTPException:  # the body went over the size limit while it arrived
        raise
    except Exception as e:  # malformed multipart bodies
        raise APIError(f"malformed multipart body: {e}", code="malformed_multipart") from None
    try:
        file = form.get("file")
        if not isinstance(file, UploadFile):
            raise Unprocessable(
                "file: missing the 'file' part (multipart field name must be 'file')",
                details=[{"field": "file", "message": "required"}],
            )
        part_type = (file.content_type or "application/octet-stream").split(";")[0].strip().lower()
        if part_type not in ACCEPTED_TYPES:
            raise UnsupportedMediaType(f"file: content type {part_type!r} is not a CSV; use text/csv")
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise PayloadTooLarge(f"file is over the upload limit of {limit} bytes")
        name = form.get("name")
        return data, file.filename or "upload.csv", name if isinstance(name, str) and name else None
    finally:
        await form.close()


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    openapi_extra=UPLOAD_BODY,
    responses=responses(401, 413, 415, 422),
    summary="Upload a CSV (multipart field 'file'); it is validated and profiled",
)
async def create_dataset(request: Request, principal: CurrentTenant, state: AppState) -> Any:
    """Validate, profile and store an uploaded CSV."""
    s = state.settings
    data, filename, name = await _read_upload(request, s.max_upload_bytes)

    def _parse() -> tuple[csvdata.Table, list[csvdata.ColumnProfile]]:
        table = csvdata.parse_csv(data, max_rows=s.max_rows, max_columns=s.max_columns)
        return table, csvdata.profile(table)

    try:
        table, profile = await run_in_threadpool(_parse)
    except csvdata.CSVError as e:
        raise APIError(e.message, code=e.code, status_code=e.status_code) from None
    ds_name = (name or PurePath(filename).stem or "dataset")[:200]

    def _store() -> Dataset:
        with state.db.session() as session:
            ds = Dataset(
                id=new_id("ds"),
                tenant_id=principal.tenant_id,
                name=ds_name,
                filename=filename[:300],
                sha256=csvdata.sha256(data),
                size_bytes=len(data),
                n_rows=table.n_rows,
                n_columns=len(table.header),
                columns=[p.to_dict() for p in profile],
                blob_key="",
            )
            ds.blob_key = f"datasets/{ds.id}.csv"
            DatabaseBlobStore(session).put(ds.blob_key, data)
            session.add(ds)
        return ds

    ds = await run_in_threadpool(_store)
    return DatasetPublic.model_validate(ds)


@router.get("", response_model=DatasetList, responses=responses(401))
def list_datasets(
    session: DbSession,
    principal: CurrentTenant,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> DatasetList:
    """The tenant's datasets, newest first."""
    q = select(Dataset).where(Dataset.tenant_id == principal.tenant_id)
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    rows = session.scalars(q.order_by(Dataset.created_at.desc(), Dataset.id).limit(limit).offset(offset)).all()
    return DatasetList(items=[DatasetPublic.model_validate(r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/{dataset_id}", response_model=DatasetPublic, responses=responses(401, 404))
def read_dataset(dataset_id: str, session: DbSession, principal: CurrentTenant) -> DatasetPublic:
    """One dataset's profile."""
    return DatasetPublic.model_validate(get_dataset(session, principal.tenant_id, dataset_id))


@router.delete("/{dataset_id}", status_code=204, responses=responses(401, 404, 409))
def delete_dataset(dataset_id: str, session: DbSession, principal: CurrentTenant) -> Response:
    """Delete a dataset and its bytes (refused while a job on it is queued or running)."""
    ds = get_dataset(session, principal.tenant_id, dataset_id)
    active = session.scalar(
        select(func.count()).select_from(Job).where(Job.dataset_id == ds.id, Job.state.in_(("queued", "running")))
    )
    if active:
        raise Conflict(
            f"dataset {dataset_id!r} has {active} queued/running job(s); cancel them first", code="dataset_in_use"
        )
    DatabaseBlobStore(session).delete(ds.blob_key)
    session.delete(ds)
    session.commit()
    return Response(status_code=204)
