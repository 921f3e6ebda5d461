"""Shared request dependencies as `Annotated` aliases: DbSession, CurrentTenant, AppState."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader
from sqlalchemy.orm import Session
from starlette.types import Scope

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


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization", "").strip()
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return None


def presented_key(api_key: str | None, request: Request) -> str | None:
    """The key the caller sent, surrounding whitespace removed on both sides (keys never contain any).

    X-API-Key comes first: a proxy in front (oauth2-proxy, a gateway) may set `Authorization: Bearer` to a
    token of its own, which must not turn a request with a key into a 401; Bearer is read only without one.
    """
    return (api_key or "").strip() or _bearer(request)


async def authenticate(request: Request) -> Principal:
    """The principal of the request's API key (X-API-Key or Bearer); Unauthenticated when missing or invalid."""
    return await _principal(request, request.headers.get("x-api-key") or None)


async def current_principal(
    request: Request, api_key: Annotated[str | None, Security(_api_key_header)] = None
) -> Principal:
    """Authenticate the API key (X-API-Key or Bearer; one security dependency, cheap on the hot path)."""
    return await _principal(request, api_key)


def _one_key_header(request: Request) -> None:
    """X-API-Key given more than once with different values: refused, so that no key silently wins."""
    raw = request.scope["headers"]
    if (
        sum(1 for name, _ in raw if name == b"x-api-key") > 1
        and len({v.strip() for v in request.headers.getlist("x-api-key")}) > 1
    ):
        raise Unauthenticated(
            "X-API-Key is given more than once with different keys; send one key", code="ambiguous_api_key"
        )


async def _principal(request: Request, api_key: str | None) -> Principal:
    if api_key is not None:
        _one_key_header(request)
    key = presented_key(api_key, request)
    if not key:
        raise Unauthenticated(
            "missing API key: send it as 'X-API-Key: <key>' or 'Authorization: Bearer <key>'", code="missing_api_key"
        )
    state = service_state(request)
    principal = await state.auth_cache.get(keys.hash_key(key), lambda: lookup_key(state.db, key))
    if principal is None:
        raise Unauthenticated("invalid or revoked API key", code="invalid_api_key")
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
