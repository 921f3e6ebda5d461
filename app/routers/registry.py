"""Named models and their movable aliases (`name@alias`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response
from sqlalchemy.orm import Session

from app.deps import AppState, CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.errors import Error
from app.schemas.models import AliasPublic, AliasUpdate, RegisteredModelList, RegisteredModelPublic
from app.schemas.registry_events import RegistryEventList, RegistryEventPublic
from app.schemas.reviews import ReviewCreate, ReviewPublic
from app.services import aliases, registry, registry_events, reviews
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
    summary="Create or move an alias, e.g. production -> version 3 (where the tenant requires approval, only to an "
    "approved version: 409 version_not_approved)",
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


@router.post(
    "/{name}/versions/{version}/reviews",
    status_code=201,
    response_model=ReviewPublic,
    responses={
        **responses(401, 404, 409, 422),
        403: {
            "description": "`self_review`: the key that created the version may not review it (or the key's scope "
            "does not allow this operation)",
            "model": Error,
        },
    },
    summary="Approve or reject a version (another key than its creator's; an approval needs an evaluation)",
)
def review_version(
    name: str,
    version: Annotated[int, Path(ge=1, le=2**31 - 1)],
    body: ReviewCreate,
    session: DbSession,
    principal: CurrentTenant,
) -> ReviewPublic:
    """Record a review of a version in the model's registry events: 403 `self_review` for the key that created
    it, 409 `evaluation_required` for an approval of a version with no succeeded evaluation."""
    r = reviews.review_version(
        session,
        principal.tenant_id,
        name,
        version,
        decision=body.decision,
        note=body.note,
        api_key_id=principal.key_id,
    )
    return ReviewPublic.from_review(r)


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
