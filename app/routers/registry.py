"""Named models and their movable aliases (`name@alias`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import NotFound, responses
from app.schemas.models import AliasPublic, AliasUpdate, RegisteredModelList, RegisteredModelPublic
from app.services import registry
from app.tables import ModelAlias, ModelVersion, RegisteredModel

router = APIRouter(prefix="/v1/registered-models", tags=["registered models"])


def to_public(session: Session, rm: RegisteredModel) -> RegisteredModelPublic:
    """Named model row -> response."""
    latest, n = session.execute(
        select(func.max(ModelVersion.version), func.count()).where(ModelVersion.registered_model_id == rm.id)
    ).one()
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
    q = select(RegisteredModel).where(RegisteredModel.tenant_id == principal.tenant_id)
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    rows = session.scalars(q.order_by(RegisteredModel.name).limit(limit).offset(offset)).all()
    return RegisteredModelList(items=[to_public(session, r) for r in rows], total=total, limit=limit, offset=offset)


@router.get("/{name}", response_model=RegisteredModelPublic, responses=responses(401, 404))
def read_model(name: str, session: DbSession, principal: CurrentTenant) -> RegisteredModelPublic:
    """One named model with its aliases."""
    return to_public(session, registry.get_model(session, principal.tenant_id, name))


@router.put(
    "/{name}/aliases/{alias}",
    response_model=AliasPublic,
    responses=responses(401, 404, 422),
    summary="Create or move an alias, e.g. production -> version 3",
)
def put_alias(
    name: str, alias: str, body: AliasUpdate, session: DbSession, principal: CurrentTenant, state: AppState
) -> Any:
    """Point `name@alias` at a version of that model."""
    rm = registry.get_model(session, principal.tenant_id, name)
    registry.check_alias(alias)
    if body.version_id is not None:
        mv = session.get(ModelVersion, body.version_id)
        if mv is None or mv.tenant_id != principal.tenant_id:
            raise NotFound(f"model version {body.version_id!r} not found")
    else:
        mv = session.scalar(
            select(ModelVersion).where(ModelVersion.registered_model_id == rm.id, ModelVersion.version == body.version)
        )
        if mv is None:
            raise NotFound(f"model {name!r} has no version {body.version}")
    row = registry.set_alias(session, rm, alias, mv)
    session.commit()
    state.alias_cache.discard((principal.tenant_id, f"{name}@{alias}"))
    return AliasPublic(name=name, alias=alias, version=mv.version, version_id=mv.id, updated_at=row.updated_at)


@router.delete("/{name}/aliases/{alias}", status_code=204, responses=responses(401, 404))
def delete_alias(name: str, alias: str, session: DbSession, principal: CurrentTenant, state: AppState) -> Response:
    """Remove an alias."""
    rm = registry.get_model(session, principal.tenant_id, name)
    res = session.execute(delete(ModelAlias).where(ModelAlias.registered_model_id == rm.id, ModelAlias.alias == alias))
    if res.rowcount == 0:  # type: ignore[attr-defined]
        raise NotFound(f"alias {name}@{alias} not found")
    session.commit()
    state.alias_cache.discard((principal.tenant_id, f"{name}@{alias}"))
    return Response(status_code=204)
