"""Verify the audit hash chains in the database, streaming: pages of rows in `seq` order, memory bounded.

A tenant's chain is read in keyset pages (`seq > last ORDER BY seq LIMIT page`, on the unique
`(tenant_id, seq)` index) and fed to `ChainChecker`, which stops at the first broken link. The chain
head is read before the rows (a tail shorter than it was deleted) and after them (rows beyond it
were not appended by the writer); rows and head commit together, so writers appending during the
check raise no false alarm.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import String, Text, cast, select, type_coerce
from sqlalchemy.orm import Session

from app.services import audit_read, registry_chain
from app.services.audit_chain import ChainBreak, ChainChecker, Link, readable_link
from app.services.errors import NotFound
from app.tables import AuditChainHead, AuditRecord, ModelAlias, ModelVersion, RegisteredModel, RegistryEvent, Tenant

PAGE_ROWS = 5000


@dataclass(frozen=True)
class RegistryBreak:
    """The first broken link of a model's registry event chain (`ChainBreak`'s fields, and which model)."""

    model: str
    registered_model_id: str
    kind: str
    message: str
    row_id: int | None
    seq: int | None


@dataclass(frozen=True)
class RegistryReport:
    """The verification of a tenant's registry event chains (one per registered model)."""

    models_checked: int
    events_checked: int
    first_break: RegistryBreak | None

    @property
    def intact(self) -> bool:
        """Whether every model's events link and end at the model's head."""
        return self.first_break is None


@dataclass(frozen=True)
class ChainReport:
    """The verification of one tenant's chains: its decisions (rows checked, the head, the first break; None:
    intact) and its registry events."""

    tenant_id: str
    rows_checked: int
    head: Link | None
    first_break: ChainBreak | None
    registry_events: RegistryReport = RegistryReport(0, 0, None)

    @property
    def intact(self) -> bool:
        """Whether every decision and every registry event links and each tail matches its head."""
        return self.first_break is None and self.registry_events.intact


def read_head(session: Session, tenant_id: str) -> Link | None:
    """The tenant's chain head, or None when it has none."""
    row = session.execute(
        select(AuditChainHead.seq, AuditChainHead.row_hash).where(AuditChainHead.tenant_id == tenant_id)
    ).first()
    return None if row is None else Link(row.seq, row.row_hash)


def chain_pages(session: Session, tenant_id: str, page_rows: int = PAGE_ROWS) -> Iterator[list[dict[str, Any]]]:
    """The tenant's audit rows as dicts (`audit_read.decode`: a row that does not decode is kept, marked
    `unreadable`), in `seq` order, `page_rows` at a time. The first page has no lower bound: a row with seq 0
    or below (none the writer makes) is read too, and the checker names it."""
    after: int | None = None
    parse_time = audit_read.time_parser(session.get_bind().dialect)
    while True:
        q = select(*audit_read.COLUMNS).where(AuditRecord.tenant_id == tenant_id)
        if after is not None:
            q = q.where(AuditRecord.seq > after)
        rows = session.execute(q.order_by(AuditRecord.seq).limit(page_rows)).mappings()
        page = [audit_read.decode(m, parse_time) for m in rows]
        if not page:
            return
        yield page
        if page[-1]["seq"] is None:  # the checker stops at that row
            return
        after = page[-1]["seq"]


def verify_tenant(session: Session, tenant_id: str, page_rows: int = PAGE_ROWS) -> ChainReport:
    """Check one tenant's chain from its first row to its head; the first broken link, if any."""
    head_before = read_head(session, tenant_id)
    checker = ChainChecker()
    for page in chain_pages(session, tenant_id, page_rows):
        if not all(checker.feed(row) for row in page):
            break
    head_after = read_head(session, tenant_id)
    broken = checker.finish(head_before, head_after)
    if broken is not None and broken.row_id is None and broken.kind == "beyond_head" and broken.seq is not None:
        broken = ChainBreak(broken.kind, broken.message, _row_id(session, tenant_id, broken.seq), broken.seq)
    head = head_after if head_after is None or readable_link(head_after) else None  # the break says what it holds
    return ChainReport(tenant_id, checker.rows_checked, head, broken, verify_registry(session, tenant_id))


_EVENT_COLUMNS = [
    type_coerce(c, String).label(c.name) if c.name == "at" else c for c in RegistryEvent.__table__.columns
]


def _event_rows(session: Session, model_id: str) -> list[dict[str, Any]]:
    """A model's events in `seq` order, as stored; one whose `at` or `seq` does not read is marked `unreadable`."""
    parse_time = audit_read.time_parser(session.get_bind().dialect)
    q = select(*_EVENT_COLUMNS).where(RegistryEvent.registered_model_id == model_id).order_by(RegistryEvent.seq)
    rows = []
    for m in session.execute(q).mappings():
        row = dict(m)
        problems = [p for p in [audit_read.parse_stored_time(row, "at", parse_time)] if p is not None]
        if not audit_read.is_whole(row["seq"]):
            problems.append("seq is not a whole number")
            row["seq"] = None
        row["unreadable"] = "; ".join(problems) or None
        rows.append(row)
    return rows


def _model_head(session: Session, model_id: str) -> Link | None:
    row = session.execute(
        select(RegisteredModel.events_seq, RegisteredModel.events_hash).where(RegisteredModel.id == model_id)
    ).first()
    return None if row is None else Link(row.events_seq, row.events_hash)


def _replayed_aliases(events: list[dict[str, Any]]) -> dict[str, tuple[int | None, int]]:
    """alias -> (version, seq of the event that set it), as a model's events in order leave them."""
    state: dict[str, tuple[int | None, int]] = {}
    for e in events:
        if e["action"] == "alias_set":
            state[e["alias"]] = (e["to_version"], e["seq"])
        elif e["action"] == "alias_deleted":
            state.pop(e["alias"], None)
    return state


def _current_aliases(session: Session, model_id: str) -> dict[str, int | None]:
    """alias -> the version number it points at now."""
    q = (
        select(ModelAlias.alias, ModelVersion.version)
        .outerjoin(ModelVersion, ModelVersion.id == ModelAlias.version_id)
        .where(ModelAlias.registered_model_id == model_id)
    )
    return {row.alias: row.version for row in session.execute(q).all()}


def _foreign_alias_break(session: Session, model_id: str) -> ChainBreak | None:
    """A break when an alias of the model points at a version of another model (`name@alias` would serve it): no
    event can set that, and the version numbers alone would compare equal."""
    q = (
        select(ModelAlias.alias, ModelVersion.id)
        .join(ModelVersion, ModelVersion.id == ModelAlias.version_id)
        .where(ModelAlias.registered_model_id == model_id, ModelVersion.registered_model_id != model_id)
        .order_by(ModelAlias.alias)
        .limit(1)
    )
    row = session.execute(q).first()
    if row is None:
        return None
    msg = f"alias {row.alias!r} points at a version of another model ({row.id}), which no event can set"
    return ChainBreak("alias_state_mismatch", msg, None, None)


def alias_state_break(replayed: dict[str, tuple[int | None, int]], current: dict[str, int | None]) -> ChainBreak | None:
    """A break when the aliases a model has now are not what its (intact) events say, else None."""
    for alias in sorted(set(replayed) | set(current)):
        said = replayed.get(alias)
        if said is not None and alias not in current:
            msg = f"alias {alias!r} is gone but no event deleted it (its event at seq {said[1]} set version {said[0]})"
        elif said is None:
            msg = f"alias {alias!r} points at version {current[alias]} but no event set it"
        elif said[0] != current[alias]:
            msg = f"alias {alias!r} points at version {current[alias]} but its last event (seq {said[1]}) set {said[0]}"
        else:
            continue
        return ChainBreak("alias_state_mismatch", msg, None, said[1] if said else None)
    return None


def _current_versions(session: Session, model_id: str) -> set[int]:
    """The model's version numbers now."""
    return set(session.scalars(select(ModelVersion.version).where(ModelVersion.registered_model_id == model_id)))


def version_state_break(events: list[dict[str, Any]], versions: set[int]) -> ChainBreak | None:
    """A break when the versions a model has now are not the ones its (intact) events created, else None: the
    record of who made a version cannot go with the chain's tail and a head moved back."""
    created = {e["to_version"]: e["seq"] for e in events if e["action"] == "version_created"}
    for version in sorted(versions - set(created)):
        return ChainBreak("version_state_mismatch", f"version {version} exists but no event created it", None, None)
    for version in sorted(set(created) - versions):
        msg = f"version {version} is gone but its event (seq {created[version]}) created it"
        return ChainBreak("version_state_mismatch", msg, None, created[version])
    return None


def _version_seals(session: Session, model_id: str) -> tuple[dict[int, str | None], dict[int, str | None]]:
    """version number -> the seal its stored rule list and text give, and -> the details seal its stored metrics,
    input schema and provenance give (None: what it seals does not read), from one read of the versions."""
    q = select(
        ModelVersion.version,
        cast(ModelVersion.rule_list, Text),
        ModelVersion.text,
        cast(ModelVersion.metrics, Text),
        cast(ModelVersion.input_schema, Text),
        cast(ModelVersion.provenance, Text),
    ).where(ModelVersion.registered_model_id == model_id)
    contents, details = {}, {}
    for v, stored, text, metrics, schema, provenance in session.execute(q).all():
        contents[int(v)] = _stored_sha256(stored, text)
        details[int(v)] = _stored_details(metrics, schema, provenance)
    return contents, details


def _stored_sha256(stored: str | None, text: Any) -> str | None:
    """The seal a stored rule list (JSON text) and text give (None: the list is no JSON object, or repeats a key)."""
    try:
        document = json.loads(stored or "", object_pairs_hook=audit_read.unique_keys)
    except ValueError:
        return None
    return registry_chain.version_sha256(document, text) if isinstance(document, dict) else None


def content_break(events: list[dict[str, Any]], contents: dict[int, str | None]) -> ChainBreak | None:
    """A break when a version's stored rule list is not the one its (intact) `version_created` event sealed."""
    for e in events:
        sealed, version = e.get("content_sha256"), e["to_version"]
        if e["action"] != "version_created" or sealed is None or version not in contents:
            continue
        if contents[version] != sealed:
            msg = f"version {version}'s rule list or text is not the one its event (seq {e['seq']}) sealed"
            return ChainBreak("version_content_mismatch", msg, None, e["seq"])
    return None


def _stored_details(metrics: str | None, input_schema: str | None, provenance: str | None) -> str | None:
    """The details seal stored JSON texts give (None: one is no JSON, or repeats a key)."""
    try:
        values = [
            json.loads(t or "", object_pairs_hook=audit_read.unique_keys) for t in (metrics, input_schema, provenance)
        ]
    except ValueError:
        return None
    return registry_chain.details_sha256(*values)


def details_break(events: list[dict[str, Any]], details: dict[int, str | None]) -> ChainBreak | None:
    """A break when a version's metrics, input schema or provenance are not the ones its (intact) event sealed."""
    for e in events:
        sealed, version = e.get(registry_chain.DETAILS_COLUMN), e["to_version"]
        if e["action"] != "version_created" or sealed is None or version not in details:
            continue
        if details[version] != sealed:
            msg = (
                f"version {version}'s metrics, input schema or provenance are not the ones its event "
                f"(seq {e['seq']}) sealed"
            )
            return ChainBreak("version_details_mismatch", msg, None, e["seq"])
    return None


def name_break(events: list[dict[str, Any]], name: str) -> ChainBreak | None:
    """A break when an (intact) event was recorded for a model of another name than the model has now."""
    for e in events:
        bound = e.get(registry_chain.NAME_COLUMN)
        if bound is not None and bound != name:
            msg = f"the model is named {name!r} but its event at seq {e['seq']} was recorded for the model {bound!r}"
            return ChainBreak("model_name_mismatch", msg, None, e["seq"])
    return None


CONSISTENT_READS = 5  # tries at reading a model's events, aliases and versions while no change of it commits


def _check_model(session: Session, model_id: str, name: str) -> tuple[int, ChainBreak | None]:
    """One model's event chain (events linked, the tail against the head) and its aliases against the events: the
    events checked and the first break. Every change of a model moves its head with its alias in one transaction,
    so a read during which the head stayed put saw both alike; the aliases are compared only on such a read (a
    move committing between the reads made a false alarm), and a model changed on every try is checked for its
    chain alone."""
    checked = 0
    for _ in range(CONSISTENT_READS):
        checker = ChainChecker(registry_chain.event_hash)
        head_before = _model_head(session, model_id)
        rows = _event_rows(session, model_id)
        for row in rows:
            if not checker.feed(row):
                break
        aliases, versions = _current_aliases(session, model_id), _current_versions(session, model_id)
        foreign = _foreign_alias_break(session, model_id)
        contents, details = _version_seals(session, model_id)
        head_after = _model_head(session, model_id)
        broken = checker.finish(head_before, head_after)
        if broken is not None:
            return checker.rows_checked, broken
        if head_before == head_after:
            state = (
                name_break(rows, name)
                or foreign
                or alias_state_break(_replayed_aliases(rows), aliases)
                or version_state_break(rows, versions)
                or content_break(rows, contents)
                or details_break(rows, details)
            )
            return checker.rows_checked, state
        checked = checker.rows_checked
    return checked, None


def verify_registry(session: Session, tenant_id: str) -> RegistryReport:
    """Check each of the tenant's models' registry event chains (by model name); the first broken link, if any."""
    models = session.execute(
        select(RegisteredModel.id, RegisteredModel.name)
        .where(RegisteredModel.tenant_id == tenant_id)
        .order_by(RegisteredModel.name)
    ).all()
    checked = 0
    for n, (model_id, name) in enumerate(models, start=1):
        events_checked, broken = _check_model(session, model_id, name)
        checked += events_checked
        if broken is not None:
            where = RegistryBreak(name, model_id, broken.kind, broken.message, broken.row_id, broken.seq)
            return RegistryReport(n, checked, where)
    return RegistryReport(len(models), checked, None)


def _row_id(session: Session, tenant_id: str, seq: int) -> int | None:
    q = select(AuditRecord.id).where(AuditRecord.tenant_id == tenant_id, AuditRecord.seq == seq)
    return session.execute(q).scalar()


def resolve_tenant(session: Session, tenant: str) -> str:
    """The id of a tenant given by name or id (also one deleted since, if its chain remains); NotFound otherwise."""
    found = session.scalar(select(Tenant.id).where((Tenant.name == tenant) | (Tenant.id == tenant)))
    if found is not None:
        return found
    if tenant in chain_tenants(session):
        return tenant
    raise NotFound(f"no tenant {tenant!r} and no audit chain for it")


def chain_tenants(session: Session) -> list[str]:
    """Every tenant with a chain head or audit rows, sorted."""
    heads = set(session.scalars(select(AuditChainHead.tenant_id)))
    rows = set(session.scalars(select(AuditRecord.tenant_id).distinct()))
    return sorted(heads | rows)


def audited_tenants(session: Session) -> list[str]:
    """Every tenant that exists or has a chain, sorted: a tenant whose whole chain was deleted is listed with 0 rows
    (against the head recorded outside the database, that is the deletion), never left out of the report."""
    return sorted(set(chain_tenants(session)) | set(session.scalars(select(Tenant.id))))


def verify_all(session: Session, page_rows: int = PAGE_ROWS) -> Iterator[ChainReport]:
    """Check every tenant's chain, one report per tenant."""
    for tenant_id in audited_tenants(session):
        yield verify_tenant(session, tenant_id, page_rows)
