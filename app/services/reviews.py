"""Reviews of versions and the approval gate (DESIGN "Review and governance": a rule list goes live only after a
person has read it, scored it on data it never saw, compared it with production, and promoted it).

A review is a `version_reviewed` event in the model's hash-chained registry events (`registry_events`), so the
audit verification covers it: the decision (`approve` / `reject`), the reviewer's note, the reviewing key and the
succeeded evaluations of the version it rests on. The key that created the version (the importing key, or the key
that submitted its training job) may not review it; an approval needs at least one succeeded evaluation of the
version. The latest review of a version decides its approval state: a rejection after an approval withdraws it.

A tenant whose operator set `require_approval` (`neurules-admin set-policy`) may point an alias only at an approved
version (`check_promotable`, called by `aliases.put_alias` under the model's lock, which a review takes too, so a
rejection and an alias move of the same model never interleave). Deleting an alias stays allowed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services import registry, registry_events
from app.services.errors import Conflict, Forbidden, Invalid
from app.services.job_states import JobState
from app.services.tenants import find_tenant, tenant_not_found
from app.services.text_checks import unprintable_character
from app.tables import Evaluation, Job, ModelVersion, RegisteredModel, RegistryEvent, Tenant, utcnow

log = logging.getLogger("neurules.governance")

Decision = Literal["approve", "reject"]
ApprovalState = Literal["approved", "rejected", "pending"]
DECISIONS: tuple[Decision, ...] = ("approve", "reject")
STATE_OF: dict[str, ApprovalState] = {"approve": "approved", "reject": "rejected"}
NOTE_MAX_CHARS = 2000
MAX_EVALUATIONS_RECORDED = 50  # the newest succeeded evaluations a review names (the event stays small)
REVIEWED: registry_events.Action = "version_reviewed"


@dataclass(frozen=True)
class Approval:
    """A version's approval state: its latest review (`pending`: none yet), and whether its tenant requires one
    before an alias may point at it."""

    state: ApprovalState
    required: bool
    api_key_id: str | None = None
    at: datetime | None = None
    note: str | None = None
    evaluation_ids: list[str] = field(default_factory=list)
    seq: int | None = None


@dataclass(frozen=True)
class Review:
    """One recorded review (its registry event) of a version."""

    name: str
    version: int
    version_id: str
    decision: Decision
    note: str
    api_key_id: str | None
    evaluation_ids: list[str]
    at: datetime
    seq: int
    row_hash: str


def split_ids(stored: str | None) -> list[str]:
    """The evaluation ids an event stores (comma-separated) as a list."""
    return [i for i in (stored or "").split(",") if i]


def requires_approval(session: Session, tenant_id: str) -> bool:
    """Whether the tenant's operator requires an approval before an alias points at a version."""
    return bool(session.scalar(select(Tenant.require_approval).where(Tenant.id == tenant_id)))


def latest_review(session: Session, mv: ModelVersion) -> RegistryEvent | None:
    """The newest `version_reviewed` event of a version (its model's chain, by version number), None without one."""
    q = (
        select(RegistryEvent)
        .where(
            RegistryEvent.registered_model_id == mv.registered_model_id,
            RegistryEvent.action == REVIEWED,
            RegistryEvent.to_version == mv.version,
        )
        .order_by(RegistryEvent.seq.desc())
        .limit(1)
    )
    return session.scalar(q)


def state_of(event: RegistryEvent | None) -> ApprovalState:
    """The approval state a version's latest review (`latest_review`) gives it."""
    return STATE_OF.get(event.decision or "", "pending") if event is not None else "pending"


def approval_of(session: Session, mv: ModelVersion) -> Approval:
    """A version's approval state, from its latest review."""
    required = requires_approval(session, mv.tenant_id)
    event = latest_review(session, mv)
    state = state_of(event)
    if event is None or state == "pending":
        return Approval("pending", required)
    return Approval(
        state,
        required,
        api_key_id=event.api_key_id,
        at=event.at,
        note=event.note,
        evaluation_ids=split_ids(event.evaluation_ids),
        seq=event.seq,
    )


def creator_key(session: Session, mv: ModelVersion) -> str | None:
    """The API key that created a version: its `version_created` event's key (the importing key, or the key that
    submitted its training job), else its job's key; None when neither recorded one."""
    q = select(RegistryEvent.api_key_id).where(
        RegistryEvent.registered_model_id == mv.registered_model_id,
        RegistryEvent.action == "version_created",
        RegistryEvent.to_version == mv.version,
    )
    key = session.scalar(q.order_by(RegistryEvent.seq).limit(1))
    if key is None and mv.job_id is not None:
        key = session.scalar(select(Job.api_key_id).where(Job.id == mv.job_id))
    return key


def succeeded_evaluations(session: Session, mv: ModelVersion) -> list[str]:
    """Ids of the version's succeeded evaluations, newest first (at most MAX_EVALUATIONS_RECORDED)."""
    q = (
        select(Evaluation.id)
        .where(
            Evaluation.tenant_id == mv.tenant_id,
            Evaluation.model_version_id == mv.id,
            Evaluation.state == JobState.SUCCEEDED,
        )
        .order_by(Evaluation.finished_at.desc(), Evaluation.created_at.desc(), Evaluation.id)
        .limit(MAX_EVALUATIONS_RECORDED)
    )
    return list(session.scalars(q))


def check_note(note: str) -> str:
    """The note as sent when it is usable: not blank, at most NOTE_MAX_CHARS, no control or invisible character
    besides line breaks and tabs (a bidi override would make the record read otherwise than it says)."""
    if not note.strip():
        raise Invalid.field("note", "must not be empty: say what was checked", code="invalid_note")
    if len(note) > NOTE_MAX_CHARS:
        raise Invalid.field("note", f"{len(note)} characters; at most {NOTE_MAX_CHARS} are allowed", code="too_long")
    bad = unprintable_character(note.replace("\n", " ").replace("\r", " ").replace("\t", " "))
    if bad is not None:
        msg = f"must not contain control or invisible characters (found {bad})"
        raise Invalid.field("note", msg, code="invalid_note")
    return note


def review_version(
    session: Session,
    tenant_id: str,
    name: str,
    version: int,
    *,
    decision: Decision,
    note: str,
    api_key_id: str,
) -> Review:
    """Record a review of version `version` of `name` by `api_key_id` (committed): Forbidden `self_review` for the
    key that created it, Conflict `evaluation_required` for an approval without a succeeded evaluation."""
    if decision not in DECISIONS:
        raise Invalid.field("decision", f"must be one of {', '.join(DECISIONS)} (got {decision!r})")
    check_note(note)
    registry.serialize_on_sqlite(session)  # the evaluations and the head are read, then the event written
    rm = registry.get_model(session, tenant_id, name, lock=True)  # the model's lock: alias moves wait for it
    mv = registry.find_version(session, tenant_id, rm, version=version, version_id=None)
    creator = creator_key(session, mv)
    if creator is not None and creator == api_key_id:
        session.rollback()
        raise Forbidden(
            f"API key {creator} created version {mv.version} of {rm.name!r}: it may not review it; another key "
            "(another person) must",
            code="self_review",
            details=[{"field": "api_key_id", "message": f"{creator} created this version"}],
        )
    if decision == "reject":
        check_rejectable(session, rm, mv)
    evaluation_ids = succeeded_evaluations(session, mv)
    if decision == "approve" and not evaluation_ids:
        session.rollback()
        raise Conflict(
            f"version {mv.version} of {rm.name!r} has no succeeded evaluation: score it on data it never saw "
            f"(POST /v1/models/{rm.name}@{mv.version}/evaluations) before approving it",
            code="evaluation_required",
        )
    event = registry_events.record(
        session,
        rm,
        REVIEWED,
        registry_events.Actor(api_key_id=api_key_id),
        to_version=mv.version,
        decision=decision,
        note=note,
        evaluation_ids=",".join(evaluation_ids) or None,
    )
    session.commit()
    log.info(
        "version reviewed",
        extra={"tenant_id": tenant_id, "model": rm.name, "version": mv.version, "decision": decision},
    )
    return Review(
        rm.name,
        mv.version,
        mv.id,
        decision,
        note,
        api_key_id,
        evaluation_ids,
        event.at,
        event.seq,
        event.row_hash,
    )


def check_promotable(session: Session, rm: RegisteredModel, mv: ModelVersion, alias: str) -> None:
    """Conflict `version_not_approved` when the tenant requires approval and the version's latest review is not an
    approval (none, or a rejection). Call with the model locked (`registry.get_model(lock=True)`)."""
    if not requires_approval(session, rm.tenant_id):
        return
    event = latest_review(session, mv)
    state = state_of(event)
    if state == "approved":
        return
    rejected_at = event.seq if event is not None and state == "rejected" else None
    why = "has not been reviewed" if rejected_at is None else f"was rejected (review at seq {rejected_at})"
    raise Conflict(
        f"{rm.name}@{alias} cannot point at version {mv.version}: this tenant requires an approval first and the "
        f"version {why}; another key than the one that created it approves it with "
        f"POST /v1/registered-models/{rm.name}/versions/{mv.version}/reviews after an evaluation",
        code="version_not_approved",
        details=[{"field": "version", "message": f"approval state {state!r}"}],
    )


def check_decision_ref(ref: str) -> None:
    """Under the approval policy a backend's decision (a `predict` key) comes only through an alias, which points
    only at an approved version (`check_promotable`): `name@latest`, `name@3` or a version id served any version,
    reviewed or not (a backend calling `@latest` took every import and training run live). Forbidden
    `alias_required` otherwise."""
    parsed = registry.parse_ref(ref)
    if parsed.alias is not None and parsed.alias != registry.LATEST:
        return
    raise Forbidden(
        f"{ref!r} names a version, not an alias: this tenant requires an approval before a version decides, so "
        "a predict key decides only through an alias (e.g. name@production), which points only at approved versions",
        code="alias_required",
        details=[{"field": "ref", "message": "use name@<alias>"}],
    )


def check_rejectable(session: Session, rm: RegisteredModel, mv: ModelVersion) -> None:
    """Under the approval policy, Conflict `version_in_use` for a rejection of a version an alias points at: the
    alias would go on serving a rejected version; move it first (deleting it or pointing it at an approved one)."""
    pointing = sorted(a for a, v in registry.aliases_of(session, rm.id).items() if v == mv.id)
    if pointing and requires_approval(session, rm.tenant_id):
        session.rollback()
        raise Conflict(
            f"version {mv.version} of {rm.name!r} serves as {', '.join(f'{rm.name}@{a}' for a in pointing)}: "
            "move the alias first (to an approved version, or delete it), then reject the version",
            code="version_in_use",
            details=[{"field": "decision", "message": f"aliases: {', '.join(pointing)}"}],
        )


def unapproved_aliases(session: Session, tenant_id: str) -> list[str]:
    """`name@alias` of the tenant's aliases pointing at a version not approved (what turning the policy on leaves
    serving until someone reviews it or moves the alias)."""
    out = []
    for rm in session.scalars(select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id)):
        for alias, version_id in sorted(registry.aliases_of(session, rm.id).items()):
            mv = session.get(ModelVersion, version_id)
            if mv is not None and state_of(latest_review(session, mv)) != "approved":
                out.append(f"{rm.name}@{alias} (version {mv.version})")
    return out


def set_policy(session: Session, tenant: str, require_approval: bool) -> tuple[Tenant, bool]:
    """Set a tenant's (by name or id) approval policy; the tenant and its policy before. Logged (the operator's
    change, made outside the API)."""
    found = find_tenant(session, tenant)
    if found is None:
        raise tenant_not_found(session, tenant)
    before = bool(found.require_approval)
    if before != require_approval:
        found.require_approval = require_approval
        found.approval_policy_changed_at = utcnow()
        log.warning(
            "approval policy changed",
            extra={"tenant_id": found.id, "tenant": found.name, "require_approval": require_approval, "before": before},
        )
    return found, before
