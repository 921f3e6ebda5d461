"""Served models by reference: parsed rule lists cached per immutable version, aliases kept fresh in the background."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from app.db import Database
from app.services import registry
from app.services.errors import NotFound
from app.services.refresh_cache import RefreshAheadCache
from app.services.serving import ServedModel, TTLCache
from app.tables import RegisteredModel


class ModelStore:
    """Resolves `ref` (version id, name@alias, name@N, name@latest) to a ServedModel; the database only on misses.

    Versions are immutable, so a parsed version stays cached (LRU). A name reference resolves to a
    version id through a `RefreshAheadCache`: at most `alias_ttl_s` old, renewed in the background
    while in use, so a moved alias takes effect within that bound and no request waits for it.
    """

    def __init__(self, db: Database, *, model_cache_size: int, alias_ttl_s: float) -> None:
        self.db = db
        self.versions = TTLCache(model_cache_size, None)  # version id -> ServedModel (immutable)
        self.aliases: RefreshAheadCache[str] = RefreshAheadCache(10_000, alias_ttl_s)  # (tenant, ref) -> version id

    async def get(self, tenant_id: str, ref: str) -> ServedModel:
        """The served model (NotFound for an unknown reference or another tenant's version); loads run in a thread."""
        vid = registry.parse_ref(ref).version_id
        if vid is None:
            vid = await self.aliases.get((tenant_id, ref), lambda: self.load(tenant_id, ref).version_id)
        served = self._version(tenant_id, vid) if vid is not None else None
        if served is not None:
            return served
        return await asyncio.to_thread(self.load, tenant_id, ref)

    def _version(self, tenant_id: str, version_id: str) -> ServedModel | None:
        served: ServedModel | None = self.versions.get(version_id)
        if served is not None and served.tenant_id != tenant_id:
            raise NotFound(f"model version {version_id!r} not found")
        return served

    def load(self, tenant_id: str, ref: str) -> ServedModel:
        """The served model from the database, cached by version (blocking: call it off the event loop)."""
        with self.db.sessionmaker() as s:
            mv = registry.resolve(s, tenant_id, ref)
            served = self._version(tenant_id, mv.id)
            if served is not None:
                return served
            name = s.scalar(select(RegisteredModel.name).where(RegisteredModel.id == mv.registered_model_id)) or ""
            served = ServedModel.build(mv.id, mv.tenant_id, name, mv.version, mv.rule_list)
        self.versions.put(mv.id, served)
        return served

    def forget_alias(self, tenant_id: str, name: str, alias: str) -> None:
        """Drop a moved or deleted alias from this process's cache."""
        self.aliases.discard((tenant_id, f"{name}@{alias}"))
