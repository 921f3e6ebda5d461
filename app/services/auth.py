"""Who is calling: an API key resolved to its tenant (keys are stored hashed, see `keys`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.db import Database
from app.services import key_scopes, keys
from app.tables import ApiKey, Tenant


@dataclass(frozen=True)
class Principal:
    """The caller: the tenant and the API key used."""

    tenant_id: str
    key_id: str
    scope: str = "full"  # `key_scopes`: what the key may do
    require_approval: bool = False  # the tenant's policy (`reviews`): decisions only through an alias


def lookup_key(db: Database, key: str) -> Principal | None:
    """The principal of a valid, unrevoked key; None for a malformed, unknown or revoked one."""
    prefix = keys.split_prefix(key)
    if prefix is None:
        return None
    with db.sessionmaker() as s:
        columns = (ApiKey.id, ApiKey.tenant_id, ApiKey.prefix, ApiKey.key_hash, ApiKey.revoked_at, ApiKey.scope)
        row = s.execute(
            select(*columns, Tenant.require_approval)
            .join(Tenant, Tenant.id == ApiKey.tenant_id)
            .where(ApiKey.prefix.in_(key_scopes.stored_prefixes(prefix)))
        ).first()
    if row is None or row.revoked_at is not None or not keys.matches(key, row.key_hash):
        return None
    scope = key_scopes.scope_of(row.prefix, row.scope)
    return Principal(row.tenant_id, row.id, scope, require_approval=bool(row.require_approval))
