"""The edge where failures become HTTP: one error shape for every 4xx/5xx, `{"error": {"code", "message", "details"}}`.

Services raise `app.services.errors.DomainError` kinds; this module alone decides their status codes,
and also shapes FastAPI's validation errors, Starlette's HTTP errors and the database's errors: values it
refused (422) and outages (503 `database_unavailable` with `Retry-After`). Database errors are answered
here, by handlers Starlette's ExceptionMiddleware runs, so uvicorn keeps the keep-alive connection: an
exception that reaches the catch-all (Starlette's ServerErrorMiddleware) is re-raised after its 500 and
the connection is dropped.
"""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse as StarletteJSONResponse
from sqlalchemy.exc import DataError, SQLAlchemyError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from app.db import is_schema_missing, is_unavailable_error, outage_cause
from app.http.bodies import AllowedMethods, is_unreadable_body, not_json_message, unreadable_body_message
from app.http.validation import plain_message
from app.observability import REQUEST_ID_STATE
from app.schemas.errors import Error
from app.services.errors import (
    Conflict,
    DomainError,
    Forbidden,
    Invalid,
    Malformed,
    NotFound,
    TooLarge,
    Unauthenticated,
    Unavailable,
    Unsupported,
)

log = logging.getLogger("neurules.errors")


STATUS_OF: dict[type[DomainError], int] = {
    NotFound: 404,
    Invalid: 422,
    Conflict: 409,
    TooLarge: 413,
    Unsupported: 415,
    Malformed: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    Unavailable: 503,
}
HEADERS_401 = {"WWW-Authenticate": "Bearer"}
RETRY_AFTER_S = 5  # what a 503 tells clients to wait: the database's pool pre-ping and reconnect take about this
DATABASE_UNAVAILABLE = "the database is unavailable; nothing was done, try again shortly"


def _driver_errors() -> tuple[type[Exception], ...]:
    """Exceptions the database drivers raise themselves (normally SQLAlchemy wraps them)."""
    out: list[type[Exception]] = [sqlite3.Error]
    try:
        import psycopg

        out.append(psycopg.Error)
    except ImportError:  # a SQLite-only install
        pass
    return tuple(out)


class ErrorJSON(StarletteJSONResponse):
    """An error's JSON response; text that is not valid Unicode (a lone surrogate a request carried into a
    message) is sent escaped rather than failing the response."""

    def render(self, content: Any) -> bytes:
        """UTF-8 JSON, ASCII-escaped where the text cannot be encoded."""
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def status_of(exc: DomainError) -> int:
    """The HTTP status of a domain error: that of the first kind in its class hierarchy (400 for none)."""
    for cls in type(exc).__mro__:
        if cls in STATUS_OF:
            return STATUS_OF[cls]
    return 400


def domain_error_response(exc: DomainError) -> ErrorJSON:
    """The response for a domain error: its status, the error shape, `WWW-Authenticate` on 401."""
    status = status_of(exc)
    headers = HEADERS_401 if status == 401 else {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return ErrorJSON(error_body(exc.code, exc.message, exc.details), status_code=status, headers=headers)


def error_body(code: str, message: str, details: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON body of an error response."""
    return {"error": {"code": code, "message": message, "details": details or []}}


def _loc(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = [str(p) for p in loc if p not in ("body",)]
    out = ""
    for p in parts:
        out += f"[{p}]" if p.isdigit() else (f".{p}" if out else p)
    return out or "body"


def validation_details(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Turn pydantic errors into `[{field, message}]` with dotted/indexed field paths."""
    out = []
    for e in errors:
        if e.get("type") == "json_invalid":  # loc is ("body", character offset)
            loc = tuple(e.get("loc", ()))
            where = f" at character {loc[1]}" if len(loc) > 1 else ""
            reason = (e.get("ctx") or {}).get("error", "")
            out.append({"field": "body", "message": f"invalid JSON{where}" + (f": {reason}" if reason else "")})
        else:
            out.append({"field": _loc(e.get("loc", ())), "message": plain_message(e)})
    return out


def _body_detail(message: str) -> dict[str, Any]:
    field, _, text = message.partition(": ")
    return {"field": field, "message": text}


def _allowed_methods(request: Request) -> list[str]:
    """The methods the request's path answers, from the OpenAPI document (built once per app); none for a page
    outside it, whose route names its own (`_with_head`: its 405 said `Allow:` with nothing)."""
    app = request.app
    table = getattr(app.state, "allowed_methods", None)
    if table is None:
        paths = app.openapi().get("paths", {})
        table = AllowedMethods({t: [m for m in ops if m != "parameters"] for t, ops in paths.items()})
        app.state.allowed_methods = table
    return table.of(request.url.path)


def _with_head(allow: str) -> list[str]:
    """The methods a route's own 405 names (a page outside the schema: /openapi.json, /docs), HEAD with GET."""
    methods = {m.strip().upper() for m in allow.split(",") if m.strip()}
    return sorted(methods | ({"HEAD"} if "GET" in methods else set()))


async def _domain_error(_: Request, exc: DomainError) -> ErrorJSON:
    return domain_error_response(exc)


async def _validation(request: Request, exc: RequestValidationError) -> ErrorJSON:
    errors = list(exc.errors())
    details = validation_details(errors)
    content_type = request.headers.get("content-type")
    for i, e in enumerate(errors):
        not_json = not_json_message(e, content_type)
        if not_json is not None:  # the body was never read as JSON: say why, not "must be an object"
            details[i] = _body_detail(not_json)
    first = details[0] if details else {"field": "body", "message": "invalid"}
    msg = f"{first['field']}: {first['message']}"
    if len(details) > 1:
        msg += f" (and {len(details) - 1} more)"
    return ErrorJSON(error_body("invalid_input", msg, details), status_code=422)


_ENCODED_SLASH = re.compile(rb"%2f", re.IGNORECASE)  # decoded before routing: `a%2Fb` splits into two segments


async def _http(request: Request, exc: StarletteHTTPException) -> ErrorJSON:
    if is_unreadable_body(exc.status_code, exc.detail):
        message = unreadable_body_message(exc.__cause__, request.headers.get("content-encoding"))
        return ErrorJSON(error_body("invalid_input", message, [_body_detail(message)]), status_code=422)
    if exc.status_code == 404 and _ENCODED_SLASH.search(request.scope.get("raw_path") or b""):
        message = (
            "the path holds an encoded '/' (%2F) inside a segment: names, aliases, versions and ids never contain '/'"
        )
        return ErrorJSON(error_body("invalid_input", message, [{"field": "path", "message": message}]), 422)
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(exc.status_code, "http_error")
    headers = dict(getattr(exc, "headers", None) or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(_allowed_methods(request) or _with_head(headers.get("Allow", "")))
    return ErrorJSON(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=headers or None)


async def _data_error(request: Request, exc: DataError) -> ErrorJSON:
    # the database refused a value the API let through (PostgreSQL: a NUL character in a string, a string
    # over its column's length, a number out of its column's range); the request's transaction is rolled
    # back, nothing is written
    log.warning("database refused a value on %s %s: %s", request.method, request.url.path, exc.orig)
    message = (
        "a value in the request (path, query or body) cannot be stored or looked up: it contains a NUL "
        "character, is too long, or is a number out of range"
    )
    return ErrorJSON(error_body("invalid_input", message), status_code=422)


async def _database_error(request: Request, exc: Exception) -> ErrorJSON:
    # an outage answers 503 naming the database; any other database error is a bug: 500, but answered here
    # (not by the catch-all below) so the client's keep-alive connection survives it too
    if is_unavailable_error(exc):
        log.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
        cause = outage_cause(exc)
        message = f"{DATABASE_UNAVAILABLE} ({cause})" if cause else DATABASE_UNAVAILABLE
        return domain_error_response(Unavailable(message, dependency="database"))
    if is_schema_missing(exc):  # an operator's step, not a bug: started without `migrate` (a 500 before)
        log.error("database schema behind the code on %s %s: %s", request.method, request.url.path, exc)
        message = f"{DATABASE_UNAVAILABLE} (its schema is behind this release: run `neurules-admin migrate`)"
        return domain_error_response(Unavailable(message, dependency="database"))
    rid = request.scope.get("state", {}).get(REQUEST_ID_STATE)
    log.error("database error on %s %s", request.method, request.url.path, exc_info=exc, extra={"request_id": rid})
    return ErrorJSON(internal_error_body(rid), status_code=500)


async def _client_gone(request: Request, _: ClientDisconnect) -> ErrorJSON:
    # the client hung up while its body arrived: nobody reads this answer, but the access log and the metrics
    # count it as the client's doing (it was an "unhandled error", a 500 with a traceback); nothing was done
    log.info("client disconnected before sending the whole body on %s %s", request.method, request.url.path)
    message = "the client closed the connection before the whole request body arrived; nothing was done"
    return ErrorJSON(error_body("client_disconnected", message, [{"field": "body", "message": message}]), 400)


async def _unexpected(request: Request, exc: Exception) -> ErrorJSON:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    # sent by Starlette's outermost middleware, around the one that adds this header to every other answer
    headers = {"X-Content-Type-Options": "nosniff"}
    return ErrorJSON(internal_error_body(None), 500, headers=headers)


def internal_error_body(request_id: str | None) -> dict[str, Any]:
    """The body of a 500: nothing about the bug, the request id to find it in the log by."""
    return error_body(
        "internal_error", "internal error; see the service log" + (f" (request id {request_id})" if request_id else "")
    )


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error the same shape (the most specific kind wins)."""
    app.exception_handler(DomainError)(_domain_error)
    app.exception_handler(RequestValidationError)(_validation)
    app.exception_handler(StarletteHTTPException)(_http)
    app.exception_handler(DataError)(_data_error)
    app.exception_handler(ClientDisconnect)(_client_gone)
    kinds: tuple[type[Exception], ...] = (SQLAlchemyError, *_driver_errors())
    for kind in kinds:
        app.exception_handler(kind)(_database_error)
    app.exception_handler(Exception)(_unexpected)


ERROR_TEXT = {
    400: "Bad request: a multipart body that cannot be parsed",
    401: "Missing or unknown API key",
    403: "The API key's scope does not allow this operation (a `predict` key asks for decisions only)",
    404: "Not found (or owned by another tenant)",
    409: "Conflict with the resource's state",
    413: "Payload over the configured limit",
    415: "Unsupported content type or encoding",
    422: "Invalid input; the message names the field / row / record",
    503: "A dependency is unavailable (`database_unavailable`, `broker_unavailable`, `audit_unavailable`, "
    "`temporary_storage_unavailable`); "
    "nothing was done: retry after `Retry-After` seconds",
}


def responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for the given error statuses, each the shared `Error` schema (`$ref`).

    A 503 also documents its `Retry-After` header.
    """
    out: dict[int | str, dict[str, Any]] = {
        c: {"description": ERROR_TEXT.get(c, "Error"), "model": Error} for c in codes
    }
    if 503 in out:
        out[503]["headers"] = {"Retry-After": RETRY_AFTER_HEADER}
    return out


RETRY_AFTER_HEADER = {"description": "seconds to wait before retrying", "schema": {"type": "integer"}}
