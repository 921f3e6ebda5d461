"""Tenants and their API keys (the admin side: create, list, revoke)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from sqlalchemy import String, select, text
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.services import key_scopes, keys
from app.services.errors import Conflict, Invalid, NotFound
from app.services.name_hints import reads_alike
from app.services.registry import serialize_on_sqlite
from app.services.text_checks import check_printable
from app.tables import ApiKey, Tenant, new_id, utcnow

# the PostgreSQL advisory lock that serialises tenant creation (a fixed 64-bit number of our own: blake2b-8 of
# "neurules:create-tenant")
CREATE_TENANT_LOCK = 0x5B0AA043E0E69A22
# what `new_id("tn")` makes (hex digits, any length and case): a name of this shape would read as an id
TENANT_ID_SHAPE = re.compile(r"tn_[0-9a-f]+", re.IGNORECASE)


def max_length(column: InstrumentedAttribute[str]) -> int | None:
    """The length limit of a String column (None when it has none)."""
    return column.type.length if isinstance(column.type, String) else None


def check_length(field: str, value: str, column: InstrumentedAttribute[str]) -> None:
    """Invalid when `value` is longer than `column` holds."""
    limit = max_length(column)
    if limit is not None and len(value) > limit:
        raise Invalid.field(field, f"{len(value)} characters; at most {limit} are allowed", code="too_long")


def looks_like_tenant_id(text: str) -> bool:
    """Whether `text` has the shape of a tenant id (`tn_` and hex digits)."""
    return TENANT_ID_SHAPE.fullmatch(text) is not None


def check_tenant_name(name: str) -> None:
    """Invalid unless `name` is a usable tenant name: not blank, no edge spaces or control characters, no id shape."""
    if not name.strip():
        raise Invalid.field("tenant name", "must not be empty or blank", code="invalid_tenant_name")
    if name != name.strip():
        raise Invalid.field("tenant name", "must not start or end with whitespace", code="invalid_tenant_name")
    check_printable("tenant name", name, code="invalid_tenant_name")
    if looks_like_tenant_id(name):
        # lookups take a name or an id: such a name would shadow, or be shadowed by, a tenant's id
        msg = f"{name!r} looks like a tenant id (tn_ and hex digits); choose another name"
        raise Invalid.field("tenant name", msg, code="invalid_tenant_name")
    check_length("tenant name", name, Tenant.name)


def check_key_label(label: str) -> None:
    """Invalid unless `label` is a usable key label: no control or invisible characters (a bidi override in a
    label reversed the key id shown beside it in the console and the CLI: who did what, spoofed), within length."""
    check_printable("label", label, code="invalid_key_label")
    check_length("label", label, ApiKey.label)


def find_tenant(session: Session, tenant: str) -> Tenant | None:
    """The tenant whose id, or else whose name, is `tenant`; Conflict when it is one tenant's id and another's name."""
    by_id = session.get(Tenant, tenant) if looks_like_tenant_id(tenant) else None
    by_name = session.scalar(select(Tenant).where(Tenant.name == tenant))
    if by_id is not None and by_name is not None and by_id.id != by_name.id:
        raise Conflict(
            f"{tenant!r} is both the id of tenant {by_id.name!r} and the name of tenant {by_name.id}: "
            f"give {by_id.name!r} or {by_name.id} instead",
            code="tenant_ambiguous",
        )
    return by_id or by_name


def tenant_not_found(session: Session, tenant: str) -> NotFound:
    """NotFound for a tenant name or id that names none, pointing at the tenant it most likely meant."""
    twin = reads_alike(tenant, session.scalars(select(Tenant.name)).all())
    exact = "give a tenant's name exactly as it was created"
    hint = f"did you mean {twin!r}? ({exact})" if twin else "create it with create-tenant"
    return NotFound(f"no tenant {tenant!r}; {hint}")


def create_tenant(session: Session, name: str) -> Tenant:
    """A new tenant; Invalid for an unusable name, Conflict when the name is taken or differs from a tenant's only in
    case or Unicode form (`Acme` beside `acme`: an operator issuing a key to one would read it as the other's)."""
    check_tenant_name(name)
    serialize_tenant_creation(session)
    names = session.scalars(select(Tenant.name)).all()
    if name in names:
        raise Conflict(f"tenant {name!r} already exists", code="tenant_exists")
    twin = reads_alike(name, names)
    if twin is not None:
        raise Conflict(
            f"tenant {name!r} differs only in case or Unicode form from the existing tenant {twin!r}: "
            "use that one, or choose a name that reads differently",
            code="tenant_case_conflict",
        )
    t = Tenant(id=new_id("tn"), name=name)
    session.add(t)
    return t


def serialize_tenant_creation(session: Session) -> None:
    """Hold, until the transaction ends, the lock every tenant creation takes before it reads the names.

    The twin check reads the names, then inserts: two commands at once (`Acme` and `acme`) each read none of
    the other's and both inserted, since no unique index can see that two names read alike. SQLite: the write
    lock, taken before the read; PostgreSQL: a transaction-scoped advisory lock (no table privilege needed).
    """
    serialize_on_sqlite(session)
    conn = session.connection()
    if conn.dialect.name != "sqlite":
        conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": CREATE_TENANT_LOCK})


def create_key(session: Session, tenant: str, label: str = "", scope: str = "full") -> tuple[ApiKey, str]:
    """A new API key for a tenant (by id or name) with a scope (`key_scopes`): the row and the key itself, which is
    not stored."""
    check_key_label(label)
    key_scopes.check_scope(scope)
    t = find_tenant(session, tenant)
    if t is None:
        raise tenant_not_found(session, tenant)
    key, prefix = keys.generate_key()
    row = ApiKey(
        id=new_id("key"),
        tenant_id=t.id,
        prefix=key_scopes.stored_prefix(prefix, scope),
        key_hash=keys.hash_key(key),
        label=label,
        scope=scope,
    )
    session.add(row)
    return row, key


def revoke_key(session: Session, key_id: str) -> datetime | None:
    """Revoke an API key by id; NotFound when there is none. A key revoked already keeps its first revocation's
    time (revoking again moved it, so who could use the key until when was lost): that time, else None."""
    row = session.get(ApiKey, key_id)
    if row is None:
        raise NotFound(f"no key {key_id!r}")
    if row.revoked_at is not None:
        return row.revoked_at
    row.revoked_at = utcnow()
    return None


def tenant_keys(session: Session, tenant_id: str) -> list[ApiKey]:
    """A tenant's API keys (revoked ones too), oldest first."""
    q = select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at, ApiKey.id)
    return list(session.scalars(q))


def list_tenants(session: Session) -> list[dict[str, Any]]:
    """Tenants with their approval policy (`require_approval`, set by the operator with `set-policy`, and when it was
    last changed) and their keys (ids, labels, revocation; never the keys)."""
    out = []
    for t in session.scalars(select(Tenant).order_by(Tenant.name)):
        ks = tenant_keys(session, t.id)
        out.append(
            {
                "id": t.id,
                "name": t.name,
                "require_approval": bool(t.require_approval),
                "approval_policy_changed_at": (
                    None if t.approval_policy_changed_at is None else t.approval_policy_changed_at.isoformat()
                ),
                "keys": [
                    {"id": k.id, "label": k.label, "scope": k.scope, "revoked": k.revoked_at is not None} for k in ks
                ],
            }
        )
    return out
