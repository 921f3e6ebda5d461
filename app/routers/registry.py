"""Named models and their movable aliases (`name@alias`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.models import AliasPublic, AliasUpdate, RegisteredModelList, RegisteredModelPublic
from app.schemas.registry_events import RegistryEventList, RegistryEventPublic
from app.services import aliases, registry, registry_events
from app.tables import RegisteredModel

router = APIRouter(prefix="/v1/registered-models", tags=["registered models"], route_class=StrictQueryRoute)


def to_public(session: Session, rm: RegisteredModel) -> RegisteredModelPublic:
    """Named model row -> response."""
    latest, n = registry.version_stats(session, rm.id)
    return RegisteredModelPublic(
        name=rm.name,
        latest_version=latest,
        n_versions=n,
        aliases=registry.aliases_of(session, rm.id),
        created_at=rm.created_at,
    )


@router.get("", response_model=RegisteredModelList, responses=responses(401))
def list_models(
    session: DbSession,
    principal: CurrentTenant,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> RegisteredModelList:
    """The tenant's named models, by name."""
    page = registry.list_models(session, principal.tenant_id, limit=limit, offset=offset)
    items = [to_public(session, r) for r in page.items]
    return RegisteredModelList(items=items, total=page.total, limit=limit, offset=offset)


@router.get("/{name}", response_model=RegisteredModelPublic, responses=responses(401, 404))
def read_model(name: str, session: DbSession, principal: CurrentTenant) -> RegisteredModelPublic:
    """One named model with its aliases."""
    return to_public(session, registry.get_model(session, principal.tenant_id, name))


@router.put(
    "/{name}/aliases/{alias}",
    response_model=AliasPublic,
    responses=responses(401, 404, 409, 422),
    summary="Create or move an alias, e.g. production -> version 3",
)
def put_alias(
    name: str, alias: str, body: AliasUpdate, session: DbSession, principal: CurrentTenant, state: AppState
) -> AliasPublic:
    """Point `name@alias` at a version of that model."""
    t = aliases.put_alias(
        session,
        state.models,
        principal.tenant_id,
        name,
        alias,
        version=body.version,
        version_id=body.version_id,
        api_key_id=principal.key_id,
    )
    return AliasPublic(name=t.name, alias=t.alias, version=t.version, version_id=t.version_id, updated_at=t.updated_at)


@router.delete("/{name}/aliases/{alias}", status_code=204, responses=responses(401, 404))
def delete_alias(name: str, alias: str, session: DbSession, principal: CurrentTenant, state: AppState) -> Response:
    """Remove an alias."""
    aliases.delete_alias(session, state.models, principal.tenant_id, name, alias, api_key_id=principal.key_id)
    return Response(status_code=204)


@router.get(
    "/{name}/events",
    response_model=RegistryEventList,
    responses=responses(401, 404),
    summary="Who moved or deleted which alias and created which version, newest first",
)
def list_events(
    name: str,
    session: DbSession,
    principal: CurrentTenant,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> RegistryEventList:
    """A named model's registry events (written in the same transaction as each change)."""
    rm = registry.get_model(session, principal.tenant_id, name)
    page = registry_events.list_events(session, rm, limit=limit, offset=offset)
    items = [RegistryEventPublic.from_row(e) for e in page.items]
    return RegistryEventList(items=items, total=page.total, limit=limit, offset=offset)
