"""Shared request dependencies as `Annotated` aliases: DbSession, CurrentTenant, AppState."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy.orm import Session
from starlette.types import Scope

from app.observability import PRINCIPAL_STATE
from app.services import key_scopes, keys
from app.services.auth import Principal, lookup_key
from app.services.errors import Unauthenticated
from app.state import ServiceState

__all__ = ["AppState", "CurrentTenant", "DbSession", "Principal", "authenticate", "get_state", "service_state"]


def service_state(request: Request) -> ServiceState:
    """The service's shared state (settings, database, caches, queue), typed."""
    state: ServiceState = request.app.state.service
    return state


async def get_state(request: Request) -> ServiceState:
    """The service's shared state as a dependency."""
    return service_state(request)


AppState = Annotated[ServiceState, Depends(get_state)]


def get_db(request: Request) -> Iterator[Session]:
    """A session per request; services commit explicitly, anything else rolls back."""
    session = service_state(request).db.sessionmaker()
    try:
        yield session
    finally:
        session.close()


DbSession = Annotated[Session, Depends(get_db)]

_api_key_header = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="tenant API key; `Authorization: Bearer <key>` is accepted too"
)


def bearer_token(value: str | None) -> str | None:
    """The credential of one `Authorization: Bearer <credential>` value (the scheme in any case, blanks around
    dropped); None for another scheme or none."""
    value = (value or "").strip()
    return value[7:].strip() or None if value[:7].lower() == "bearer " else None


def _header_values(request: Request, name: bytes) -> list[str]:
    """Every value of one header (a client or a proxy may repeat it), blanks around each dropped."""
    return [v.decode("latin-1").strip() for n, v in request.scope["headers"] if n == name]


def presented_key(request: Request) -> str | None:
    """The key the caller sent, surrounding whitespace removed on both sides (keys never contain any).

    X-API-Key comes first: a proxy in front (oauth2-proxy, a gateway) may set `Authorization: Bearer` to a
    token of its own, which must not turn a request with a key into a 401; Bearer is read only without one.
    A header repeated with different keys is refused (ambiguous_api_key), so that no key silently wins,
    whichever comes first; a repeated empty value is no key.
    """
    keys = {v for v in _header_values(request, b"x-api-key") if v}
    header = "X-API-Key"
    if not keys:
        keys = {k for k in map(bearer_token, _header_values(request, b"authorization")) if k}
        header = "Authorization: Bearer"
    if len(keys) > 1:
        raise Unauthenticated(
            f"{header} is given more than once with different keys; send one key", code="ambiguous_api_key"
        )
    return next(iter(keys), None)


async def authenticate(request: Request) -> Principal:
    """The principal of the request's API key (X-API-Key or Bearer); Unauthenticated when missing or invalid."""
    return await _principal(request)


async def current_principal(
    request: Request,
    api_key: Annotated[str | None, Security(_api_key_header)] = None,  # documents the header in OpenAPI
) -> Principal:
    """Authenticate the API key (X-API-Key or Bearer; one security dependency, cheap on the hot path)."""
    return await _principal(request)


async def _principal(request: Request) -> Principal:
    key = presented_key(request)
    if not key:
        raise Unauthenticated(
            "missing API key: send it as 'X-API-Key: <key>' or 'Authorization: Bearer <key>'", code="missing_api_key"
        )
    state = service_state(request)
    principal = await state.auth_cache.get(keys.hash_key(key), lambda: lookup_key(state.db, key))
    if principal is None:
        raise Unauthenticated("invalid or revoked API key", code="invalid_api_key")
    request.scope.setdefault("state", {})[PRINCIPAL_STATE] = principal  # the access line names who called
    key_scopes.require(principal.scope, request.method, route_path(request.scope))
    return principal


def route_path(scope: Scope) -> str:
    """The request's path as the routes see it: without the `root_path` a proxy mounts the app under (uvicorn
    `--root-path /nr` puts it in front of `path`; routing strips it, so the scope check must too)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :]
    return path


CurrentTenant = Annotated[Principal, Depends(current_principal)]
