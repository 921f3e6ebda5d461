"""Served models by reference: parsed rule lists cached per immutable version, aliases for a few seconds."""

from __future__ import annotations

from sqlalchemy import select

from app.db import Database
from app.services import registry
from app.services.errors import NotFound
from app.services.serving import ServedModel, TTLCache
from app.tables import RegisteredModel


class ModelStore:
    """Resolves `ref` (version id, name@alias, name@N, name@latest) to a ServedModel; the database only on misses."""

    def __init__(self, db: Database, *, model_cache_size: int, alias_ttl_s: float) -> None:
        self.db = db
        self.versions = TTLCache(model_cache_size, None)  # version id -> ServedModel (immutable)
        self.aliases = TTLCache(10_000, alias_ttl_s)  # (tenant id, ref) -> version id

    def cached(self, tenant_id: str, ref: str) -> ServedModel | None:
        """The served model from the caches (no I/O), or None on a miss; another tenant's is NotFound."""
        r = registry.parse_ref(ref)
        vid = r.version_id or self.aliases.get((tenant_id, ref))
        served: ServedModel | None = self.versions.get(vid) if vid is not None else None
        if served is not None and served.tenant_id != tenant_id:
            raise NotFound(f"model version {ref!r} not found")
        return served

    def load(self, tenant_id: str, ref: str) -> ServedModel:
        """The served model, from the caches or the database (blocking: call it off the event loop)."""
        served = self.cached(tenant_id, ref)
        if served is not None:
            return served
        with self.db.sessionmaker() as s:
            mv = registry.resolve(s, tenant_id, ref)
            name = s.scalar(select(RegisteredModel.name).where(RegisteredModel.id == mv.registered_model_id)) or ""
            served = ServedModel.build(mv.id, mv.tenant_id, name, mv.version, mv.rule_list)
        self.versions.put(mv.id, served)
        if registry.parse_ref(ref).version_id is None:
            self.aliases.put((tenant_id, ref), mv.id)
        return served

    def forget_alias(self, tenant_id: str, name: str, alias: str) -> None:
        """Drop a moved or deleted alias from this process's cache."""
        self.aliases.discard((tenant_id, f"{name}@{alias}"))
