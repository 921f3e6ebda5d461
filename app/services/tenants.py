"""Tenants and their API keys (the admin side: create, list, revoke)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services import keys
from app.services.errors import Conflict, NotFound
from app.tables import ApiKey, Tenant, new_id, utcnow


def create_tenant(session: Session, name: str) -> Tenant:
    """A new tenant; Conflict when the name is taken."""
    if session.scalar(select(Tenant).where(Tenant.name == name)) is not None:
        raise Conflict(f"tenant {name!r} already exists", code="tenant_exists")
    t = Tenant(id=new_id("tn"), name=name)
    session.add(t)
    return t


def create_key(session: Session, tenant: str, label: str = "") -> tuple[ApiKey, str]:
    """A new API key for a tenant (by name or id): the row and the key itself, which is not stored."""
    t = session.scalar(select(Tenant).where((Tenant.name == tenant) | (Tenant.id == tenant)))
    if t is None:
        raise NotFound(f"no tenant {tenant!r}; create it with create-tenant")
    key, prefix = keys.generate_key()
    row = ApiKey(id=new_id("key"), tenant_id=t.id, prefix=prefix, key_hash=keys.hash_key(key), label=label)
    session.add(row)
    return row, key


def revoke_key(session: Session, key_id: str) -> None:
    """Revoke an API key by id; NotFound when there is none."""
    row = session.get(ApiKey, key_id)
    if row is None:
        raise NotFound(f"no key {key_id!r}")
    row.revoked_at = utcnow()


def tenant_keys(session: Session, tenant_id: str) -> list[ApiKey]:
    """A tenant's API keys (revoked ones too), oldest first."""
    q = select(ApiKey).where(ApiKey.tenant_id == tenant_id).order_by(ApiKey.created_at, ApiKey.id)
    return list(session.scalars(q))


def list_tenants(session: Session) -> list[dict[str, Any]]:
    """Tenants with their keys (ids, labels, revocation; never the keys)."""
    out = []
    for t in session.scalars(select(Tenant).order_by(Tenant.name)):
        ks = tenant_keys(session, t.id)
        out.append(
            {
                "id": t.id,
                "name": t.name,
                "keys": [{"id": k.id, "label": k.label, "revoked": k.revoked_at is not None} for k in ks],
            }
        )
    return out
