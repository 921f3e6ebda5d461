"""Reading a CSV upload from a multipart body (shared by the datasets and CSV prediction endpoints)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Request
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.services.datasets import Upload
from app.services.errors import Invalid, Malformed, TooLarge, Unsupported

ACCEPTED_TYPES = frozenset(
    {
        "text/csv",
        "application/csv",
        "text/plain",
        "application/vnd.ms-excel",
        "application/octet-stream",
        "text/x-csv",
        "application/x-csv",
        "text/comma-separated-values",
    }
)
MULTIPART_OVERHEAD = 64 * 1024


def multipart_body(file_description: str, *, with_name: bool = False) -> dict[str, Any]:
    """The OpenAPI `requestBody` of an endpoint that takes a CSV in the multipart field `file`."""
    properties: dict[str, Any] = {"file": {"type": "string", "format": "binary", "description": file_description}}
    if with_name:
        properties["name"] = {"type": "string", "description": "dataset name (default: file name stem)"}
    schema = {"type": "object", "required": ["file"], "properties": properties}
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}


def _check_headers(request: Request, limit: int) -> None:
    ctype = request.headers.get("content-type", "")
    if not ctype.startswith("multipart/form-data"):
        raise Unsupported(
            f"send the CSV as multipart/form-data with a 'file' part (got content type {ctype or 'none'!r})"
        )
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + MULTIPART_OVERHEAD:
        raise TooLarge(f"upload is {int(length)} bytes; the limit is {limit} bytes")


async def _form(request: Request, limit: int) -> FormData:
    _check_headers(request, limit)
    try:
        return await request.form(max_files=1, max_fields=10)
    except StarletteHTTPException:  # the body went over the size limit while it arrived
        raise
    except Exception as e:  # noqa: BLE001 -- whatever the multipart parser refused is a malformed body
        raise Malformed(f"malformed multipart body: {e}", code="malformed_multipart") from None


def _file_part(form: FormData) -> UploadFile:
    file = form.get("file")
    if not isinstance(file, UploadFile):
        raise Invalid(
            "file: missing the 'file' part (multipart field name must be 'file')",
            details=[{"field": "file", "message": "required"}],
        )
    part_type = (file.content_type or "application/octet-stream").split(";")[0].strip().lower()
    if part_type not in ACCEPTED_TYPES:
        raise Unsupported(f"file: content type {part_type!r} is not a CSV; use text/csv")
    return file


@asynccontextmanager
async def upload_file(request: Request, limit: int) -> AsyncIterator[UploadFile]:
    """The file part of a multipart body (at most `limit` bytes), spooled to disk as it arrived; closed on exit."""
    form = await _form(request, limit)
    try:
        file = _file_part(form)
        if file.size is not None and file.size > limit:
            raise TooLarge(f"file is over the upload limit of {limit} bytes")
        await file.seek(0)
        yield file
    finally:
        await form.close()


async def read_upload(request: Request, limit: int) -> Upload:
    """The file part of a multipart body (at most `limit` bytes), its file name and the optional `name` field."""
    form = await _form(request, limit)
    try:
        file = _file_part(form)
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise TooLarge(f"file is over the upload limit of {limit} bytes")
        name = form.get("name")
        return Upload(data, file.filename or "upload.csv", name if isinstance(name, str) and name else None)
    finally:
        await form.close()
