"""Who is calling: an API key resolved to its tenant (keys are stored hashed, see `keys`)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from app.db import Database
from app.services import key_scopes, keys
from app.tables import ApiKey


@dataclass(frozen=True)
class Principal:
    """The caller: the tenant and the API key used."""

    tenant_id: str
    key_id: str
    scope: str = "full"  # `key_scopes`: what the key may do


def lookup_key(db: Database, key: str) -> Principal | None:
    """The principal of a valid, unrevoked key; None for a malformed, unknown or revoked one."""
    prefix = keys.split_prefix(key)
    if prefix is None:
        return None
    with db.sessionmaker() as s:
        row = s.execute(
            select(ApiKey.id, ApiKey.tenant_id, ApiKey.prefix, ApiKey.key_hash, ApiKey.revoked_at, ApiKey.scope).where(
                ApiKey.prefix.in_(key_scopes.stored_prefixes(prefix))
            )
        ).first()
    if row is None or row.revoked_at is not None or not keys.matches(key, row.key_hash):
        return None
    return Principal(tenant_id=row.tenant_id, key_id=row.id, scope=key_scopes.scope_of(row.prefix, row.scope))
