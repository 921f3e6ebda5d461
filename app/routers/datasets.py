"""Datasets: CSV upload (multipart), list, get, delete."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.http.uploads import DATASET_FIELDS, multipart_body, read_upload
from app.schemas.datasets import DatasetList, DatasetPreview, DatasetPublic
from app.services import dataset_preview, datasets
from app.services.datasets import TableLimits

router = APIRouter(prefix="/v1/datasets", tags=["datasets"], route_class=StrictQueryRoute)


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    openapi_extra=multipart_body(
        "the CSV: UTF-8, a header line, separated by `,` (or `;`, tab, `|`; with `;` decimal commas are read as "
        "numbers); may be gzip-compressed (`.csv.gz`)",
        with_name=True,
    ),
    responses=responses(401, 413, 415, 422),
    summary="Upload a CSV (multipart field 'file'); it is validated and profiled",
)
async def create_dataset(request: Request, principal: CurrentTenant, state: AppState) -> DatasetPublic:
    """Validate, profile and store an uploaded CSV."""
    s = state.settings
    upload = await read_upload(request, s.max_upload_bytes, DATASET_FIELDS)
    limits = TableLimits(max_rows=s.max_rows, max_columns=s.max_columns)
    ds = await run_in_threadpool(datasets.create_dataset, state.db, principal.tenant_id, upload, limits)
    return DatasetPublic.model_validate(ds)


@router.get("", response_model=DatasetList, responses=responses(401))
def list_datasets(
    session: DbSession,
    principal: CurrentTenant,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> DatasetList:
    """The tenant's datasets, newest first."""
    page = datasets.list_datasets(session, principal.tenant_id, limit=limit, offset=offset)
    items = [DatasetPublic.model_validate(r) for r in page.items]
    return DatasetList(items=items, total=page.total, limit=limit, offset=offset)


@router.get("/{dataset_id}", response_model=DatasetPublic, responses=responses(401, 404))
def read_dataset(dataset_id: str, session: DbSession, principal: CurrentTenant) -> DatasetPublic:
    """One dataset's profile."""
    return DatasetPublic.model_validate(datasets.get_dataset(session, principal.tenant_id, dataset_id))


@router.get(
    "/{dataset_id}/preview",
    response_model=DatasetPreview,
    responses=responses(401, 404, 422),
    summary="The first rows of a dataset, as the file has them",
)
def preview_dataset(
    dataset_id: str,
    session: DbSession,
    principal: CurrentTenant,
    limit: Annotated[int, Query(ge=1, le=dataset_preview.MAX_PREVIEW_ROWS)] = 20,
) -> DatasetPreview:
    """Header and first rows (cells as strings, missing as null)."""
    p = dataset_preview.preview(session, principal.tenant_id, dataset_id, limit)
    return DatasetPreview(columns=p.columns, rows=p.rows)


@router.delete("/{dataset_id}", status_code=204, responses=responses(401, 404, 409))
def delete_dataset(dataset_id: str, session: DbSession, principal: CurrentTenant) -> Response:
    """Delete a dataset and its bytes (refused while a job on it is queued or running)."""
    datasets.delete_dataset(session, principal.tenant_id, dataset_id, principal.key_id)
    return Response(status_code=204)
