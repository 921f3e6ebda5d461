"""Reading a CSV upload from a multipart body (shared by the datasets and CSV prediction endpoints)."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import IO, Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Message, Receive

from app.services.batch import storage_failed
from app.services.compression import gunzip, looks_gzipped
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
        "text/tab-separated-values",  # what browsers send for .tsv files (tab-separated files are read)
    }
)
GZIP_TYPES = frozenset({"application/gzip", "application/x-gzip", "application/x-gunzip"})
GZIP_CODINGS = frozenset({"gzip", "x-gzip"})  # x-gzip: gzip's old name, which HTTP/1.1 reads as gzip
MULTIPART_OVERHEAD = 64 * 1024
DATASET_FIELDS = ("file", "name")  # the multipart fields a dataset upload takes
PREDICT_FIELDS = ("file",)  # ... and predict.csv
MAX_FORM_FIELDS = 32  # text fields the parser reads before it refuses the body (the uploads take one or none)
MAX_PART_HEADER_BYTES = 4096 + 128  # python-multipart's limit on one header line of a part (its default)


def multipart_body(file_description: str, *, with_name: bool = False) -> dict[str, Any]:
    """The OpenAPI `requestBody` of an endpoint that takes a CSV in the multipart field `file`."""
    properties: dict[str, Any] = {"file": {"type": "string", "format": "binary", "description": file_description}}
    if with_name:
        properties["name"] = {
            "type": "string",
            "maxLength": 200,
            "description": "dataset name, at most 200 characters (default: file name stem)",
        }
    schema = {"type": "object", "required": ["file"], "properties": properties}
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}


def _check_headers(request: Request, limit: int) -> None:
    ctype = request.headers.get("content-type", "")
    if not ctype.lower().startswith("multipart/form-data"):  # media types are case-insensitive
        raise Unsupported(
            f"send the CSV as multipart/form-data with a 'file' part (got content type {ctype or 'none'!r})"
        )
    length = request.headers.get("content-length")
    if length and length.isdigit() and int(length) > limit + MULTIPART_OVERHEAD:
        raise TooLarge(f"upload is {int(length)} bytes; the limit is {limit} bytes")


async def _decoded(request: Request, limit: int) -> Request:
    """The request with its body gunzipped when it came with `Content-Encoding: gzip`."""
    # every Content-Encoding line, in order, as one list (a second line was ignored), `identity` dropped
    sent = ", ".join(request.headers.getlist("content-encoding"))
    codings = [c for c in (t.strip().lower() for t in sent.split(",")) if c and c != "identity"]
    if not codings:
        return request
    if len(codings) > 1 or codings[0] not in GZIP_CODINGS:
        raise Unsupported(f"Content-Encoding {sent!r} is not supported; send the body as is or gzip-compressed once")
    body = await run_in_threadpool(gunzip, await request.body(), limit + MULTIPART_OVERHEAD, "body", limit)

    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    return Request(request.scope, receive)


def _gzipped(file: UploadFile, part_type: str, data: bytes) -> bool:
    """A `.gz` name, a gzip content type or encoding on the part, or gzip's magic bytes."""
    named = (file.filename or "").lower().endswith(".gz")
    encoded = file.headers.get("content-encoding", "").strip().lower() in GZIP_CODINGS
    return named or encoded or part_type in GZIP_TYPES or looks_gzipped(data)


class _BodyTail:
    """The request's `receive`, keeping the last bytes of the body: whether it ended with its closing boundary."""

    SIZE = 256

    def __init__(self, receive: Receive) -> None:
        self.receive = receive
        self.tail = b""

    async def __call__(self) -> Message:
        message = await self.receive()
        if message["type"] == "http.request":
            self.tail = (self.tail + message.get("body", b"")[-self.SIZE :])[-self.SIZE :]
        return message

    def closed(self, content_type: str) -> bool:
        """Whether the body holds its closing delimiter `--<boundary>--` near its end (or has no boundary)."""
        found = _BOUNDARY.search(content_type)
        return found is None or b"--" + found.group(1).encode("latin-1") + b"--" in self.tail


_BOUNDARY = re.compile(r'boundary="?([^";]+)"?', re.IGNORECASE)


async def _form(request: Request, limit: int, fields: tuple[str, ...]) -> FormData:
    _check_headers(request, limit)
    request = await _decoded(request, limit)
    body = _BodyTail(request.receive)
    request = Request(request.scope, body)
    try:
        # one file more than taken and a few fields more, so that `_check_fields` names them (a second `file`, a
        # misspelt one); past these the parser refuses before any is read
        form = await request.form(max_files=2, max_fields=MAX_FORM_FIELDS)
    except StarletteHTTPException as e:
        if e.status_code != 400:  # the body went over the size limit while it arrived
            raise
        if _too_many_parts(e):
            raise Invalid.field(
                "body", f"more parts than this upload takes ({', '.join(fields)}); send each once"
            ) from None
        # Starlette turns the multipart parser's refusals (no boundary, a part header over its limit) into a
        # bare 400 `http_error`: answered as the malformed body it is
        raise _malformed(_parser_reason(e)) from None
    except ClientDisconnect:  # the client hung up mid-upload: the edge's `client_disconnected`, not a bad body
        raise
    except OSError as e:  # the parser spools a file past 1 MiB to disk: a full or failing disk is ours, not the body's
        raise storage_failed(e, "the upload") from None
    except Exception as e:  # noqa: BLE001 -- whatever the multipart parser refused is a malformed body
        raise _malformed(_parser_reason(e)) from None
    try:
        if "file" not in form and not body.closed(request.headers.get("content-type", "")):
            # the parser drops a part the body ends inside: it read as "missing the 'file' part"
            raise _malformed("the body ends before its closing boundary: it was cut off; send it whole")
        _check_fields(form, fields)
    except BaseException:
        await form.close()
        raise
    return form


def _too_many_parts(e: StarletteHTTPException) -> bool:
    """Whether the parser stopped at its limit on files or fields (the body itself was well formed so far)."""
    return str(e.detail).startswith(("Too many files", "Too many fields"))


def _parser_reason(e: BaseException) -> str:
    """The parser's reason, in words that say what to change where its own ("Invalid multipart data.") do not.

    Starlette raises its 400 while handling its MultiPartException, itself raised from python-multipart's
    error: a header line of a part over the parser's limit is, in practice, a very long file name."""
    reason = str(e.detail) if isinstance(e, StarletteHTTPException) else str(e)
    cause: BaseException | None = e
    while cause is not None:
        if "header size exceeded" in str(cause).lower():
            return (
                f"a part's header is over {MAX_PART_HEADER_BYTES} bytes, the most the multipart parser reads; "
                "the file name is likely too long: send the file under a shorter name"
            )
        cause = cause.__cause__ or cause.__context__
    return reason


def _check_fields(form: FormData, fields: tuple[str, ...]) -> None:
    """Refuse a form field the endpoint does not take (a misspelt `name` was silently ignored) and one given
    more than once (the last one silently won): a 422 naming each, as for query parameters."""
    takes = ", ".join(fields)
    details = []
    for key in dict.fromkeys(form.keys()):
        values = form.getlist(key)
        if key not in fields:
            details.append({"field": key, "message": f"unknown form field; this upload takes {takes}"})
        elif len(values) > 1:
            shown = ", ".join(repr(v) if isinstance(v, str) else f"file {v.filename!r}" for v in values[:5])
            details.append({"field": key, "message": f"given {len(values)} times ({shown}); give it once"})
    if details:
        first = details[0]
        more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
        raise Invalid(f"{first['field']}: {first['message']}{more}", details=details)


def _malformed(reason: str) -> Malformed:
    message = f"malformed multipart body: {reason}"
    return Malformed(message, code="malformed_multipart", details=[{"field": "body", "message": reason}])


def _file_part(form: FormData) -> tuple[UploadFile, str]:
    file = form.get("file")
    if isinstance(file, str):  # a part without a file name is a text field
        raise Invalid.field(
            "file",
            "the 'file' part has no file name, so it came as a text field; send it as a file part with a "
            "filename (curl: -F file=@data.csv)",
        )
    if not isinstance(file, UploadFile):
        raise Invalid(
            "file: missing the 'file' part (multipart field name must be 'file')",
            details=[{"field": "file", "message": "required"}],
        )
    part_type = (file.content_type or "application/octet-stream").split(";")[0].strip().lower()
    if part_type not in ACCEPTED_TYPES | GZIP_TYPES:
        raise Unsupported(f"file: content type {part_type!r} is not a CSV; use text/csv")
    return file, part_type


async def read_upload(request: Request, limit: int, fields: tuple[str, ...] = DATASET_FIELDS) -> Upload:
    """The file part of a multipart body (at most `limit` bytes, decompressed), its file name and `name` field.

    A form field other than `fields`, or one given twice, is a 422 naming it. A gzip-compressed file
    (`.csv.gz`, a gzip part type or `Content-Encoding`, or the whole body sent with
    `Content-Encoding: gzip`) is decompressed; the limit applies to the decompressed size.
    """
    form = await _form(request, limit, fields)
    try:
        file, part_type = _file_part(form)
        data = await file.read(limit + 1)
        if len(data) > limit:
            raise TooLarge(f"file is over the upload limit of {limit} bytes")
        if _gzipped(file, part_type, data):
            data = await run_in_threadpool(gunzip, data, limit)
        name = form.get("name")
        return Upload(data, file.filename or "upload.csv", name if isinstance(name, str) and name else None)
    except OSError as e:  # reading back what the parser spooled to disk
        raise storage_failed(e, "the upload") from None
    finally:
        await form.close()


@asynccontextmanager
async def upload_stream(
    request: Request, limit: int, fields: tuple[str, ...] = PREDICT_FIELDS
) -> AsyncIterator[IO[bytes]]:
    """The file part as a binary file to read in pieces (closed on exit); the same checks as `read_upload`.

    A plain CSV is read where the multipart parser spooled it (to disk past 1 MiB), so memory does not
    grow with it; a gzip-compressed one is decompressed in memory (at most `limit` bytes), as `read_upload` does.
    """
    form = await _form(request, limit, fields)
    try:
        file, part_type = _file_part(form)
        if file.size is not None and file.size > limit:
            raise TooLarge(f"file is over the upload limit of {limit} bytes")
        try:  # reading back what the parser spooled to disk
            await file.seek(0)
            head = await file.read(2)
            await file.seek(0)
            data = await file.read(limit + 1) if _gzipped(file, part_type, head) else None
        except OSError as e:
            raise storage_failed(e, "the upload") from None
        yield file.file if data is None else io.BytesIO(await run_in_threadpool(gunzip, data, limit))
    finally:
        await form.close()
