"""Model registry: named models, immutable versions, movable aliases (`name@alias`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.services import registry_chain, registry_events
from app.services.audit import take_sqlite_write_lock
from app.services.errors import Conflict, Invalid, NotFound
from app.services.paging import Page, page_of_scalars
from app.tables import ModelAlias, ModelVersion, RegisteredModel, new_id, utcnow
from models.rulelist import DocumentError, RuleList, check_new_document, label_key

# \Z, not $: `$` also matches before a final newline, which let "risk\n" through as a name
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\Z")
ALIAS_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
LATEST = "latest"


@dataclass(frozen=True)
class Ref:
    """A parsed model reference: a version id, `name@alias`, `name@<number>` or `name@latest`."""

    version_id: str | None = None
    name: str | None = None
    alias: str | None = None
    number: int | None = None


def parse_ref(ref: str) -> Ref:
    """Parse a model reference string."""
    if "@" not in ref:
        return Ref(version_id=ref)
    name, _, tail = ref.partition("@")
    if not NAME_RE.match(name) or not tail:
        raise NotFound(f"model {ref!r} not found: use a version id or name@alias")
    if tail.isascii() and tail.isdigit():  # str.isdigit() alone is true of '²', which int() refuses
        if len(tail) > 10 or int(tail) > 2**31 - 1:  # beyond the version column: no such version
            raise NotFound(f"model {ref!r} not found: no such version")
        return Ref(name=name, number=int(tail))
    return Ref(name=name, alias=tail)


NAME_RULE = "1 to 100 letters, digits, '_', '.' or '-', starting with a letter or digit"


def check_name(name: str, field: str = "name") -> str:
    """Validate a model name as a client sent it (`field`: where, for the 422): NAME_RE, no other form.

    One rule wherever a name comes in (a job's `model_name`, an import's `name`): it is the name's segment of
    `name@alias` in URLs, so nothing is trimmed, shortened or replaced.
    """
    if not NAME_RE.match(name):
        shown = repr(name) if len(name) <= 120 else f"{name[:100]!r}... ({len(name)} characters)"
        raise Invalid.field(field, f"{shown} is not a valid model name: {NAME_RULE}")
    return name


def check_alias(alias: str) -> str:
    """Validate an alias name."""
    # 'LATEST' would be an alias beside the reserved 'latest': `m@LATEST` and `m@latest` two versions for a client
    # that folds case
    if not ALIAS_RE.match(alias) or alias.lower() == LATEST:
        raise Invalid(
            f"alias: {alias!r} is not a valid alias (starts with a letter; letters, digits, '_', "
            "'-'; 'latest' is reserved, in any case)",
            details=[{"field": "alias", "message": "invalid alias"}],
        )
    return alias


def resolve(session: Session, tenant_id: str, ref: str) -> ModelVersion:
    """The version a reference points at, within the tenant; NotFound otherwise."""
    r = parse_ref(ref)
    if r.version_id is not None:
        mv = session.get(ModelVersion, r.version_id)
        if mv is None or mv.tenant_id != tenant_id:
            named = session.scalar(
                select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id, RegisteredModel.name == ref)
            )
            hint = (
                f": {ref!r} is a model name; name one of its versions: {_ways_to_name(session, named)}" if named else ""
            )
            raise NotFound(f"model version {ref!r} not found{hint}")
        return mv
    rm = session.scalar(
        select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id, RegisteredModel.name == r.name)
    )
    if rm is None:
        raise NotFound(f"model {r.name!r} not found")
    if r.number is not None:
        mv = session.scalar(
            select(ModelVersion).where(ModelVersion.registered_model_id == rm.id, ModelVersion.version == r.number)
        )
    elif r.alias == LATEST:
        mv = session.scalar(
            select(ModelVersion)
            .where(ModelVersion.registered_model_id == rm.id)
            .order_by(ModelVersion.version.desc())
            .limit(1)
        )
    else:
        vid = session.scalar(
            select(ModelAlias.version_id).where(ModelAlias.registered_model_id == rm.id, ModelAlias.alias == r.alias)
        )
        mv = session.get(ModelVersion, vid) if vid else None
        if mv is not None and mv.registered_model_id != rm.id:  # no request sets that: changed in the database
            raise Conflict(
                f"model {ref!r}: the alias points at a version of another model ({mv.id}); nothing was decided: "
                "run neurules-admin verify-audit",
                code="alias_state_mismatch",
            )
    if mv is None:
        raise NotFound(f"model {ref!r} not found: no such version or alias; use {_ways_to_name(session, rm)}")
    return mv


def _ways_to_name(session: Session, rm: RegisteredModel) -> str:
    """How to name the model's versions, for a 404: `name@latest`, its version range and its aliases."""
    numbers = session.execute(
        select(func.min(ModelVersion.version), func.max(ModelVersion.version)).where(
            ModelVersion.registered_model_id == rm.id
        )
    ).one()
    aliases = session.scalars(
        select(ModelAlias.alias).where(ModelAlias.registered_model_id == rm.id).order_by(ModelAlias.alias).limit(20)
    ).all()
    ways = [f"{rm.name}@latest"]
    if numbers[0] is not None:
        ways.append(f"{rm.name}@<n> (versions {numbers[0]}..{numbers[1]})")
    ways += [f"{rm.name}@{a}" for a in aliases]
    return ", ".join(ways)


def serialize_on_sqlite(session: Session) -> None:
    """On SQLite, open the session's transaction with the database's write lock, before its reads.

    SQLite ignores FOR UPDATE, so a read-then-write here (where an alias points, the next version number)
    interleaved with a concurrent one: a move read the alias, a delete removed it, the move's UPDATE matched
    nothing (a 500); events recorded a `from_version` already moved; concurrent imports of one model took
    the same version number until one gave up (409). PostgreSQL's row locks do this there: a no-op.
    """
    conn = session.connection()
    if conn.dialect.name == "sqlite":
        take_sqlite_write_lock(conn)


def get_model(session: Session, tenant_id: str, name: str, lock: bool = False) -> RegisteredModel:
    """A named model of the tenant; NotFound otherwise. `lock`: its row locked (PostgreSQL) before anything below it
    (its aliases), in the order every change of a model takes its locks."""
    rm = find_model(session, tenant_id, name, lock)
    if rm is None:
        raise NotFound(f"model {name!r} not found")
    return rm


def get_or_create_model(session: Session, tenant_id: str, name: str) -> RegisteredModel:
    """The named model, created when absent (locked for the version-number increment)."""
    check_name(name)
    q = select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id, RegisteredModel.name == name)
    rm = session.scalar(q.with_for_update())
    if rm is None:
        rm = RegisteredModel(id=new_id("rm"), tenant_id=tenant_id, name=name)
        session.add(rm)
        session.flush()
    return rm


def check_same_target(session: Session, rm: RegisteredModel, target: str, field: str) -> None:
    """A registered model predicts one target: a version for another one is refused (`target_differs`).

    Its aliases would otherwise move a client from predicting one column to predicting another, and its
    versions' comparisons, evaluations and monitoring would set different questions side by side.
    """
    latest = session.scalar(
        select(ModelVersion.rule_list)
        .where(ModelVersion.registered_model_id == rm.id)
        .order_by(ModelVersion.version.desc())
        .limit(1)
    )
    if latest is not None and latest.get("target") != target:
        raise Invalid.field(
            field,
            f"model {rm.name!r} predicts {latest.get('target')!r}; a version predicting {target!r} needs a model "
            "name of its own",
            code="target_differs",
        )


def find_model(session: Session, tenant_id: str, name: str, lock: bool = False) -> RegisteredModel | None:
    """A named model of the tenant, None when it does not exist (`lock`: its row locked, PostgreSQL)."""
    q = select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id, RegisteredModel.name == name)
    return session.scalar(q.with_for_update() if lock else q)


def non_finite_path(obj: Any, path: str) -> str | None:
    """The path of the first NaN / Infinity inside a JSON value (no JSON column stores them), or of an
    integer no float can hold (the rule list evaluates numbers as floats), else None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path
    if isinstance(obj, int) and not isinstance(obj, bool):
        return path if not -1.7976931348623157e308 <= obj <= 1.7976931348623157e308 else None
    if isinstance(obj, dict):
        items: Any = ((f"{path}.{k}", v) for k, v in obj.items())
    elif isinstance(obj, list):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(obj))
    else:
        return None
    for p, v in items:
        found = non_finite_path(v, p)
        if found:
            return found
    return None


def input_schema(rl: RuleList) -> list[dict[str, Any]]:
    """The record fields a version accepts (from the document's feature list)."""
    return [f.to_dict() for f in rl.features]


def _check_class_keys(rl: RuleList) -> None:
    """422 when two classes have the same text (`1` and `"1"`, `true` and `"true"`): answers key the
    probabilities by it (`probabilities: {class: p}`, the `p_<class>` columns) and evaluations match targets on it."""
    seen: dict[str, Any] = {}
    for c in rl.classes:
        key = label_key(c)
        if key in seen:
            msg = (
                f"invalid rule list document: classes: {seen[key]!r} and {c!r} are the same class as text "
                f"({key!r}), which answers key probabilities by; rename one"
            )
            raise Invalid(
                f"rule_list: {msg}", code="invalid_rule_list", details=[{"field": "rule_list.classes", "message": msg}]
            )
        seen[key] = c


def _check_numbers(document: Any, metrics: Any, provenance: Any) -> None:
    """422 naming the path of a number that cannot be stored or evaluated."""
    for field, value in (("rule_list", document), ("metrics", metrics), ("provenance", provenance)):
        bad = non_finite_path(value, field)
        if bad:
            raise Invalid(
                f"{bad}: NaN, Infinity and numbers beyond the float range are not allowed",
                code="invalid_rule_list" if field == "rule_list" else "invalid_input",
                details=[{"field": bad, "message": "NaN, Infinity and numbers beyond the float range are not allowed"}],
            )


def add_version(
    session: Session,
    *,
    tenant_id: str,
    name: str,
    document: dict[str, Any],
    metrics: dict[str, Any],
    provenance: dict[str, Any],
    job_id: str | None = None,
    api_key_id: str | None = None,
) -> ModelVersion:
    """Validate a rule-list document and store it as the next immutable version of `name` (with its
    `version_created` event, by the API key or the job that made it)."""
    check_name(name)  # the first field of an import: its 422 comes before the document's
    _check_numbers(document, metrics, provenance)
    try:
        rl = RuleList.from_dict(document)
        check_new_document(rl, document)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:  # ValueError names the path
        msg = str(e) if isinstance(e, ValueError) else f"malformed document ({type(e).__name__}: {e})"
        where = f"rule_list.{e.path}" if isinstance(e, DocumentError) and e.path != "document" else "rule_list"
        raise Invalid(
            f"rule_list: {msg}", code="invalid_rule_list", details=[{"field": where, "message": msg}]
        ) from None
    _check_class_keys(rl)
    serialize_on_sqlite(session)  # the next version number is read, then taken (validation done: lock held briefly)
    rm = get_or_create_model(session, tenant_id, name)
    check_same_target(session, rm, rl.target, "rule_list.target")
    last = session.scalar(select(func.max(ModelVersion.version)).where(ModelVersion.registered_model_id == rm.id))
    mv = ModelVersion(
        id=new_id("mv"),
        tenant_id=tenant_id,
        registered_model_id=rm.id,
        version=(last or 0) + 1,
        rule_list=rl.to_dict(),
        text=rl.to_text(),
        metrics=metrics,
        input_schema=input_schema(rl),
        provenance=provenance,
        job_id=job_id,
    )
    session.add(mv)
    registry_events.record(
        session,
        rm,
        "version_created",
        registry_events.Actor(api_key_id, job_id),
        to_version=mv.version,
        content_sha256=registry_chain.version_sha256(mv.rule_list, mv.text),
        details_sha256=registry_chain.details_sha256(mv.metrics, mv.input_schema, mv.provenance),
    )
    session.flush()
    return mv


ALIAS_ATTEMPTS = 5  # create-or-move rounds against concurrent creates and deletes of the same alias


def set_alias(
    session: Session,
    rm: RegisteredModel,
    alias: str,
    version: ModelVersion,
    actor: registry_events.Actor = registry_events.SYSTEM,
) -> ModelAlias:
    """Point `name@alias` at a version of the same model (create or move), with its `alias_set` event."""
    check_alias(alias)
    if version.registered_model_id != rm.id:
        # only a version_id can name another model's version (a number is looked up in this one)
        raise Invalid.field("version_id", f"{version.id!r} is a version of another model, not of {rm.name!r}")
    row = session.get(ModelAlias, (rm.id, alias), with_for_update=True)
    if row is None:
        _refuse_case_twin(session, rm, alias)
    for _ in range(ALIAS_ATTEMPTS):
        if row is not None:
            break
        try:
            with session.begin_nested():  # a concurrent request may create the same alias first
                row = ModelAlias(registered_model_id=rm.id, alias=alias, version_id=version.id)
                session.add(row)
            registry_events.record(session, rm, "alias_set", actor, alias=alias, to_version=version.version)
            return row
        except IntegrityError:  # created meanwhile: lock it and move it (None: deleted again since, create it)
            row = session.scalar(
                select(ModelAlias)
                .where(ModelAlias.registered_model_id == rm.id, ModelAlias.alias == alias)
                .with_for_update()
            )
    if row is None:
        raise Conflict(f"alias {rm.name}@{alias} is being changed concurrently; try again", code="alias_conflict")
    before = session.scalar(select(ModelVersion.version).where(ModelVersion.id == row.version_id))
    row.version_id = version.id
    row.updated_at = utcnow()
    registry_events.record(
        session, rm, "alias_set", actor, alias=alias, from_version=before, to_version=version.version
    )
    session.flush()
    return row


def _refuse_case_twin(session: Session, rm: RegisteredModel, alias: str) -> None:
    """Conflict when a new alias differs only in case from one the model has: `Production` beside `production`
    looks like it and points elsewhere, and a client that folds case would follow either."""
    existing = session.scalars(select(ModelAlias.alias).where(ModelAlias.registered_model_id == rm.id)).all()
    twin = next((a for a in existing if a != alias and a.casefold() == alias.casefold()), None)
    if twin is not None:
        raise Conflict(
            f"alias {rm.name}@{alias} differs only in case from the existing {rm.name}@{twin}: move that one, "
            "or delete it first",
            code="alias_case_conflict",
            details=[{"field": "alias", "message": f"differs only in case from {twin!r}"}],
        )


def aliases_of(session: Session, rm_id: str) -> dict[str, str]:
    """alias -> version id for one model."""
    rows = session.execute(
        select(ModelAlias.alias, ModelAlias.version_id).where(ModelAlias.registered_model_id == rm_id)
    ).all()
    return dict(rows)


def version_stats(session: Session, rm_id: str) -> tuple[int | None, int]:
    """The latest version number (None without versions) and how many versions a model has."""
    latest, n = session.execute(
        select(func.max(ModelVersion.version), func.count()).where(ModelVersion.registered_model_id == rm_id)
    ).one()
    return latest, int(n)


def list_models(session: Session, tenant_id: str, *, limit: int, offset: int) -> Page[RegisteredModel]:
    """The tenant's named models, by name."""
    q = select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id)
    return page_of_scalars(session, q, (RegisteredModel.name,), limit, offset)


def find_version(
    session: Session, tenant_id: str, rm: RegisteredModel, *, version: int | None, version_id: str | None
) -> ModelVersion:
    """A version of the tenant by id, or of `rm` by number; NotFound otherwise."""
    if version_id is not None:
        mv = session.get(ModelVersion, version_id)
        if mv is None or mv.tenant_id != tenant_id:
            raise NotFound(f"model version {version_id!r} not found")
        return mv
    found = session.scalar(
        select(ModelVersion).where(ModelVersion.registered_model_id == rm.id, ModelVersion.version == version)
    )
    if found is None:
        raise NotFound(f"model {rm.name!r} has no version {version}")
    return found
