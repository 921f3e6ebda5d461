"""Process-wide service state shared by routers: settings, database, caches, job queue, readiness checks."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.db import Database
from app.observability import Metrics
from app.services.audit import AuditWriter
from app.services.auth import Principal
from app.services.jobs import JobQueue
from app.services.model_store import ModelStore
from app.services.readiness import Check, ExpectedSchema
from app.services.refresh_cache import RefreshAheadCache
from app.settings import Settings


@dataclass
class ServiceState:
    """Everything a request handler needs besides the request."""

    settings: Settings
    db: Database
    queue: JobQueue
    metrics: Metrics
    broker_check: Check | None = None  # raises when the broker is unreachable
    worker_check: Check | None = None  # raises when no training worker can take jobs
    schema: ExpectedSchema | None = None  # the migration /readyz wants the database at (None: not checked)
    auth_cache: RefreshAheadCache[Principal] = field(init=False)
    models: ModelStore = field(init=False)
    audit: AuditWriter = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.auth_cache = RefreshAheadCache(10_000, s.auth_cache_ttl_s)  # key hash -> principal
        self.models = ModelStore(self.db, model_cache_size=s.model_cache_size, alias_ttl_s=s.alias_cache_ttl_s)
        self.audit = AuditWriter(self.db.engine)
