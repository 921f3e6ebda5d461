"""Process-wide service state shared by routers: settings, database, caches, job queue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.audit import AuditWriter
from app.db import Database
from app.services.jobs import JobQueue
from app.services.serving import TTLCache
from app.settings import Settings


@dataclass
class ServiceState:
    """Everything a request handler needs besides the request."""

    settings: Settings
    db: Database
    queue: JobQueue
    broker_check: Any = None  # () -> None, raises when the broker is unreachable
    metrics: Any = None  # app.observability.Metrics
    worker_check: Any = None  # () -> None, raises when the embedded worker thread has died
    auth_cache: TTLCache = field(init=False)
    model_cache: TTLCache = field(init=False)
    alias_cache: TTLCache = field(init=False)
    audit: AuditWriter = field(init=False)

    def __post_init__(self) -> None:
        s = self.settings
        self.auth_cache = TTLCache(10_000, s.auth_cache_ttl_s)
        self.model_cache = TTLCache(s.model_cache_size, None)
        self.alias_cache = TTLCache(10_000, s.alias_cache_ttl_s)
        self.audit = AuditWriter(self.db.engine)
