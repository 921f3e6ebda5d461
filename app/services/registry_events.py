"""Registry events: which alias moved or was deleted, which version was created or reviewed, by whom, when.

`record` adds the event to the caller's session, so it commits (or rolls back) with the change itself, linked into
its model's hash chain (`registry_chain`) after the head it reads with the model's row locked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.services import registry_chain
from app.services.audit_chain import Link
from app.services.errors import Conflict
from app.services.paging import Page, page_of_scalars
from app.tables import RegisteredModel, RegistryEvent, utcnow

# name_bound: recorded by `bind_names` for a model whose events carry no name (made before migration 0010);
# version_reviewed: a person's approval or rejection of a version (`app.services.reviews`, migration 0011)
# training_file_deleted: the dataset a version was trained on was deleted (`app.services.datasets`; `note` says which)
Action = Literal[
    "alias_set", "alias_deleted", "version_created", "name_bound", "version_reviewed", "training_file_deleted"
]


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
    content_sha256: str | None = None,
    details_sha256: str | None = None,
    decision: str | None = None,
    note: str | None = None,
    evaluation_ids: str | None = None,
) -> RegistryEvent:
    """Add one event to the session (it is written in the same transaction as the change), chained after the
    model's head: the head is read with the model's row locked (PostgreSQL; SQLite's writers hold its write lock)
    and moved in the same transaction, so two changes of one model never take the same place."""
    session.flush()  # an event recorded earlier in this transaction has moved the head already
    q = select(RegisteredModel.events_seq, RegisteredModel.events_hash).where(RegisteredModel.id == rm.id)
    seq, head_hash = session.execute(q.with_for_update()).one()
    last = session.scalar(select(func.max(RegistryEvent.seq)).where(RegistryEvent.registered_model_id == rm.id))
    if last is not None and last != seq:  # the head was moved outside the service: the next place is taken
        raise Conflict(
            f"model {rm.name!r}: its registry event chain is broken (head at seq {seq}, last event at seq {last}); "
            "nothing was changed: run neurules-admin verify-audit",
            code="registry_chain_broken",
        )
    row = {
        "tenant_id": rm.tenant_id,
        "registered_model_id": rm.id,
        "at": utcnow(),
        "action": action,
        "alias": alias,
        "from_version": from_version,
        "to_version": to_version,
        "api_key_id": actor.api_key_id,
        "job_id": actor.job_id,
        "content_sha256": content_sha256,
        "details_sha256": details_sha256,
        "model_name": rm.name,
        "decision": decision,
        "note": note,
        "evaluation_ids": evaluation_ids,
    }
    head = registry_chain.link_event(row, Link(seq, head_hash))
    event = RegistryEvent(**row)
    session.add(event)
    values = {"events_seq": head.seq, "events_hash": head.row_hash}
    session.execute(update(RegisteredModel).where(RegisteredModel.id == rm.id).values(**values))
    return event


def bind_names(session: Session) -> list[RegisteredModel]:
    """Record a `name_bound` event for each model whose events carry no name yet (made before migration 0010, or
    by an older release since): its name is then in its chain. The models bound."""
    named = select(RegistryEvent.id).where(
        RegistryEvent.registered_model_id == RegisteredModel.id, RegistryEvent.model_name.is_not(None)
    )
    q = select(RegisteredModel).where(~named.exists()).order_by(RegisteredModel.tenant_id, RegisteredModel.name)
    models = list(session.scalars(q))
    for rm in models:
        record(session, rm, "name_bound", SYSTEM)
    return models


def list_events(session: Session, rm: RegisteredModel, *, limit: int, offset: int) -> Page[RegistryEvent]:
    """A named model's events, newest first."""
    q = select(RegistryEvent).where(RegistryEvent.registered_model_id == rm.id)
    return page_of_scalars(session, q, (RegistryEvent.id.desc(),), limit, offset)


__all__ = ["SYSTEM", "Action", "Actor", "bind_names", "list_events", "record"]
