"""Movable aliases (`name@alias`): create, move, delete; each change also leaves the served-model cache."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.services import registry, registry_events, reviews
from app.services.errors import NotFound
from app.services.model_store import ModelStore
from app.tables import ModelAlias, ModelVersion


@dataclass(frozen=True)
class AliasTarget:
    """Where an alias points after a change."""

    name: str
    alias: str
    version: int
    version_id: str
    updated_at: datetime


def put_alias(
    session: Session,
    store: ModelStore,
    tenant_id: str,
    name: str,
    alias: str,
    *,
    version: int | None,
    version_id: str | None,
    api_key_id: str | None = None,
) -> AliasTarget:
    """Point `name@alias` at a version of that model (by number or id), with its event; committed. Where the tenant
    requires approval, only at a version whose latest review approved it (`reviews.check_promotable`)."""
    registry.serialize_on_sqlite(session)  # the alias row is read, then changed: one change at a time
    rm = registry.get_model(session, tenant_id, name, lock=True)  # the model before its alias, as a new version does
    registry.check_alias(alias)
    mv = registry.find_version(session, tenant_id, rm, version=version, version_id=version_id)
    if mv.registered_model_id == rm.id:  # another model's version: `set_alias` says so (422), as before
        reviews.check_promotable(session, rm, mv, alias)
    row = registry.set_alias(session, rm, alias, mv, registry_events.Actor(api_key_id=api_key_id))
    session.commit()
    store.forget_alias(tenant_id, name, alias)
    return AliasTarget(name, alias, mv.version, mv.id, row.updated_at)


def delete_alias(
    session: Session, store: ModelStore, tenant_id: str, name: str, alias: str, api_key_id: str | None = None
) -> None:
    """Remove `name@alias`, with its event; NotFound when it does not exist. Committed."""
    registry.serialize_on_sqlite(session)  # the alias row is read, then changed: one change at a time
    rm = registry.get_model(session, tenant_id, name, lock=True)  # the model before its alias, as a new version does
    row = session.get(ModelAlias, (rm.id, alias), with_for_update=True)  # a concurrent move waits for the delete
    before = (
        None if row is None else session.scalar(select(ModelVersion.version).where(ModelVersion.id == row.version_id))
    )
    res = session.execute(delete(ModelAlias).where(ModelAlias.registered_model_id == rm.id, ModelAlias.alias == alias))
    if before is None or int(res.rowcount) == 0:  # type: ignore[attr-defined]  # a DML result has a row count
        session.rollback()
        raise NotFound(f"alias {name}@{alias} not found")
    actor = registry_events.Actor(api_key_id=api_key_id)
    registry_events.record(session, rm, "alias_deleted", actor, alias=alias, from_version=before)
    session.commit()
    store.forget_alias(tenant_id, name, alias)
