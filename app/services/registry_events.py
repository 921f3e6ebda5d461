"""Registry events: which alias moved or was deleted and which version was created, by whom, when.

`record` adds the event to the caller's session, so it commits (or rolls back) with the change itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services.paging import Page, page_of_scalars
from app.tables import RegisteredModel, RegistryEvent

Action = Literal["alias_set", "alias_deleted", "version_created"]


@dataclass(frozen=True)
class Actor:
    """Who made a change: an API key (requests) or a training job (the worker)."""

    api_key_id: str | None = None
    job_id: str | None = None


SYSTEM = Actor()


def record(
    session: Session,
    rm: RegisteredModel,
    action: Action,
    actor: Actor,
    *,
    alias: str | None = None,
    from_version: int | None = None,
    to_version: int | None = None,
) -> RegistryEvent:
    """Add one event to the session (it is written in the same transaction as the change)."""
    event = RegistryEvent(
        tenant_id=rm.tenant_id,
        registered_model_id=rm.id,
        action=action,
        alias=alias,
        from_version=from_version,
        to_version=to_version,
        api_key_id=actor.api_key_id,
        job_id=actor.job_id,
    )
    session.add(event)
    return event


def list_events(session: Session, rm: RegisteredModel, *, limit: int, offset: int) -> Page[RegistryEvent]:
    """A named model's events, newest first."""
    q = select(RegistryEvent).where(RegistryEvent.registered_model_id == rm.id)
    return page_of_scalars(session, q, (RegistryEvent.id.desc(),), limit, offset)


__all__ = ["SYSTEM", "Action", "Actor", "list_events", "record"]
