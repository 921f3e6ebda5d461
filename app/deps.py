"""Shared request dependencies as `Annotated` aliases: DbSession, CurrentTenant, AppState."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import Unauthorized
from app.services import keys
from app.state import ServiceState
from app.tables import ApiKey


@dataclass(frozen=True)
class Principal:
    """Who is calling: the tenant and the API key used."""

    tenant_id: str
    key_id: str


async def get_state(request: Request) -> ServiceState:
    """The service's shared state (settings, database, caches, queue)."""
    return request.app.state.service  # type: ignore[no-any-return]


AppState = Annotated[ServiceState, Depends(get_state)]


def get_db(request: Request) -> Iterator[Session]:
    """A session per request; routers commit explicitly, anything else rolls back."""
    session = request.app.state.service.db.sessionmaker()
    try:
        yield session
    finally:
        session.close()


DbSession = Annotated[Session, Depends(get_db)]

_api_key_header = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="tenant API key; `Authorization: Bearer <key>` is accepted too"
)


def _lookup(state: ServiceState, key: str) -> Principal | None:
    prefix = keys.split_prefix(key)
    if prefix is None:
        return None
    with state.db.sessionmaker() as s:
        row = s.execute(
            select(ApiKey.id, ApiKey.tenant_id, ApiKey.key_hash, ApiKey.revoked_at).where(ApiKey.prefix == prefix)
        ).one_or_none()
    if row is None or row.revoked_at is not None or not keys.matches(key, row.key_hash):
        return None
    return Principal(tenant_id=row.tenant_id, key_id=row.id)


def _bearer(request: Request) -> str | None:
    auth = request.headers.get("authorization")
    if auth and auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return None


async def current_principal(
    request: Request, api_key: Annotated[str | None, Security(_api_key_header)] = None
) -> Principal:
    """Authenticate the API key (X-API-Key or Bearer; one security dependency, cheap on the hot path)."""
    key = api_key or _bearer(request)
    if not key:
        raise Unauthorized(
            "missing API key: send it as 'X-API-Key: <key>' or 'Authorization: Bearer <key>'", code="missing_api_key"
        )
    state: ServiceState = request.app.state.service
    cache_key = keys.hash_key(key)
    principal = state.auth_cache.get(cache_key)
    if principal is None:
        principal = await run_in_threadpool(_lookup, state, key)
        if principal is None:
            raise Unauthorized("invalid or revoked API key", code="invalid_api_key")
        state.auth_cache.put(cache_key, principal)
    return principal  # type: ignore[no-any-return]


CurrentTenant = Annotated[Principal, Depends(current_principal)]
