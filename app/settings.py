"""Service configuration: one `Settings` class read from `NEURULES_*` environment variables.

Two modes share one code path:
- `embedded` (default): SQLite file under `data_dir`, a filesystem Celery broker under
  `data_dir/broker`, and a Celery worker thread inside the API process;
- `distributed`: a server database (PostgreSQL) and a network broker (Redis) given explicitly,
  with separate `celery worker` processes.

Unsafe or inconsistent values fail at start-up with a message naming the variable.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url

from app.db import SqliteSynchronous

MAX_UPLOAD_CEILING = 2 * 1024**3  # 2 GiB: above this a CSV belongs in a blob store, not a request


MIN_METRICS_TOKEN_CHARS = 16  # a bearer secret, not a password someone types


class Settings(BaseSettings):
    """All service settings; environment variables are `NEURULES_<NAME>`."""

    # hide_input_in_errors: a refused value (a secret such as the metrics token) is not echoed into logs
    # allow_inf_nan off: `inf` passed every `gt=0` bound (NEURULES_REAPER_INTERVAL_S=inf killed the reaper thread)
    model_config = SettingsConfigDict(
        env_prefix="NEURULES_", extra="ignore", frozen=True, hide_input_in_errors=True, allow_inf_nan=False
    )

    mode: Literal["embedded", "distributed"] = "embedded"
    data_dir: Path = Path("./var")
    database_url: str | None = None  # the service's (app role's) connection
    migration_database_url: str | None = None  # the owner's, for migrations; default: database_url
    broker_url: str | None = None
    queue: str = Field("neurules-training", min_length=1, pattern=r"^\S+$")  # "" made the worker consume queue ""
    embedded_worker: bool | None = None  # default: on in embedded mode, off in distributed mode
    sqlite_synchronous: SqliteSynchronous = "full"  # normal: faster, the last commits lost with the machine
    # PostgreSQL, for the API and the workers (not migrations, not the admin commands): a statement running longer,
    # or a lock waited for longer, is cancelled by the server (a 503); 0: no bound
    database_statement_timeout_s: float = Field(30.0, ge=0, le=86400)
    database_lock_timeout_s: float = Field(10.0, ge=0, le=86400)

    # an empty host is every interface to a socket: a `--host "$HOST"` with HOST unset must not expose the API
    host: str = Field("127.0.0.1", min_length=1, pattern=r"^\S+$")
    port: int = Field(8000, ge=1, le=65535)
    workers: int = Field(1, ge=1, le=64)

    max_upload_bytes: int = 50 * 1024**2
    max_rows: int = Field(2_000_000, ge=1)
    max_columns: int = Field(2_000, ge=1)
    max_classes: int = Field(50, ge=2, le=1000)
    max_records_per_request: int = Field(10_000, ge=1, le=1_000_000)
    max_batch_rows: int = Field(1_000_000, ge=1)
    # what `serve` lets one request's head hold (431 beyond) and a request stall (408 / dropped beyond)
    max_header_bytes: int = Field(64 * 1024, ge=4096, le=16 * 1024**2)
    request_stall_s: float = Field(20.0, gt=0, le=3600)
    # on SIGTERM, requests in flight get this long to finish before they are cut (unbounded, a client uploading
    # slowly held a stop for minutes, past any orchestrator's kill)
    shutdown_grace_s: int = Field(30, ge=1, le=3600)

    training_time_limit_s: int = Field(3600, ge=2)
    training_soft_time_limit_s: int = Field(3300, ge=1)
    visibility_timeout_s: int = Field(4200, ge=30)
    max_epochs: int = Field(5000, ge=1)
    max_rules: int = Field(200, ge=1)
    max_restarts: int = Field(64, ge=1)  # rule lists trained side by side: memory and time grow with them
    # a categorical feature is one network input per value: a column of ids or free text (5,000 values made 3.6 GB,
    # 1,000,000 a 4.66 TiB allocation) is refused at submission, as is an encoded table over the cell budget
    max_category_levels: int = Field(1_000, ge=2)
    max_encoded_cells: int = Field(50_000_000, ge=1)  # rows x network inputs (8 bytes each, copied a few times)
    progress_every_epochs: int = Field(5, ge=1)
    heartbeat_interval_s: float = Field(5.0, gt=0, le=3600)
    stale_after_s: float = Field(120.0, gt=0, le=7 * 86400)
    reaper_interval_s: float = Field(30.0, gt=0, le=86400)  # 1e10 overflowed the reaper's wait
    # brokers that cannot be scanned: re-send after this wait
    resend_queued_after_s: float = Field(900.0, gt=0, le=7 * 86400)
    lost_message_grace_s: float = Field(10.0, gt=0, le=86400)  # a queued job whose message is not in the broker
    ready_min_workers: int | None = Field(None, ge=0, le=10_000)  # default: 1 with an embedded worker, else 0
    max_attempts: int = Field(2, ge=1, le=10)
    train_threads: int | None = Field(None, ge=1, le=256)  # torch threads; default: half the cores when embedded

    # set: /metrics answers only `Authorization: Bearer <token>` (its labels name tenants, models and rule counts)
    metrics_token: SecretStr | None = None
    auth_cache_ttl_s: float = Field(5.0, ge=0, le=300)  # the bound on a revoked key being accepted
    alias_cache_ttl_s: float = Field(1.0, ge=0, le=60)
    model_cache_size: int = Field(64, ge=1)

    evaluation_sync_max_rows: int = Field(50_000, ge=0)  # larger datasets are evaluated on the training workers
    drift_alert_psi: float = Field(0.2, gt=0, le=100)  # monitoring alerts when a version's rule-share PSI reaches this
    drift_min_decisions: int = Field(100, ge=1)  # ... once the version made this many decisions in the window
    drift_min_decisions_per_rule: int = Field(10, ge=0)  # ... and this many per rule of its list (default included)

    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    access_log: bool = True
    # FastAPI's own OpenTelemetry spans, metrics and logs. "auto": on when a global provider is configured at
    # start (opentelemetry-instrument) or FASTAPI_OTEL_AUTO_CONFIGURE=true; otherwise off, which spares the
    # check FastAPI makes on every request (~9 us) when nothing would be recorded. "on" checks per request.
    opentelemetry: Literal["auto", "on", "off"] = "auto"
    migrate_on_start: bool = True

    @property
    def database_timeouts_ms(self) -> tuple[int, int]:
        """(statement, lock) timeouts of the service's PostgreSQL sessions, in milliseconds (0: none)."""
        return round(self.database_statement_timeout_s * 1000), round(self.database_lock_timeout_s * 1000)

    @field_validator("sqlite_synchronous", mode="before")
    @classmethod
    def _sqlite_level_any_case(cls, value: object) -> object:
        """SQLite's own spellings (`FULL`, `Normal`) too."""
        return value.lower() if isinstance(value, str) else value

    @field_validator("metrics_token", mode="before")
    @classmethod
    def _metrics_token(cls, value: object) -> object:
        """Empty is unset (compose passes `${NEURULES_METRICS_TOKEN:-}`); a token holds no blanks (a bearer token)."""
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, str) and any(c.isspace() for c in value):
            raise ValueError("must not contain spaces or other blanks")
        if isinstance(value, str) and not (value.isascii() and value.isprintable()):
            raise ValueError("must be printable ASCII (an HTTP header carries no other characters as text)")
        if isinstance(value, str) and len(value) < MIN_METRICS_TOKEN_CHARS:
            raise ValueError(f"must be at least {MIN_METRICS_TOKEN_CHARS} characters long")
        return value

    @model_validator(mode="after")
    def _check(self) -> Settings:
        """Fail fast on unsafe or inconsistent values."""
        if not 0 < self.max_upload_bytes <= MAX_UPLOAD_CEILING:
            raise ValueError(f"NEURULES_MAX_UPLOAD_BYTES must be in 1..{MAX_UPLOAD_CEILING}")
        if self.training_soft_time_limit_s >= self.training_time_limit_s:
            raise ValueError("NEURULES_TRAINING_SOFT_TIME_LIMIT_S must be below NEURULES_TRAINING_TIME_LIMIT_S")
        if self.visibility_timeout_s <= self.training_time_limit_s:
            raise ValueError(
                "NEURULES_VISIBILITY_TIMEOUT_S must exceed NEURULES_TRAINING_TIME_LIMIT_S, "
                "or the broker redelivers a job that is still training"
            )
        if self.stale_after_s < 3 * self.heartbeat_interval_s:
            raise ValueError("NEURULES_STALE_AFTER_S must be at least 3 x NEURULES_HEARTBEAT_INTERVAL_S")
        db, broker = self.database_url, self.broker_url
        if db is not None and not db.startswith(("sqlite", "postgresql")):
            raise ValueError("NEURULES_DATABASE_URL must be a sqlite:// or postgresql:// URL")
        if db is not None:
            _url_part(db, "port", "DATABASE_URL")  # a malformed URL named here, not a traceback at first use
        if broker is not None:
            _check_broker_url(broker)
        self._check_migration_url()
        if self.mode == "distributed":
            if not db or not broker:
                raise ValueError("distributed mode needs NEURULES_DATABASE_URL and NEURULES_BROKER_URL")
            if db.startswith("sqlite"):
                raise ValueError("distributed mode needs a server database (postgresql://), not SQLite")
            if broker.startswith(("memory", "filesystem")):
                raise ValueError("distributed mode needs a network broker (redis://), not memory/filesystem")
            if self.embedded_worker:
                raise ValueError("NEURULES_EMBEDDED_WORKER is only for embedded mode")
        elif broker is not None and broker.startswith("memory"):
            raise ValueError("the memory:// broker is not shared between processes; use filesystem:// or redis://")
        return self

    @property
    def resolved_database_url(self) -> str:
        """The database URL, defaulting to a SQLite file under data_dir."""
        return self.database_url or f"sqlite:///{(self.data_dir / 'neurules.sqlite3').as_posix()}"

    def _check_migration_url(self) -> None:
        """The migration URL names the same database as the service's, on PostgreSQL (SQLite has no roles)."""
        mig, db = self.migration_database_url, self.resolved_database_url
        if mig is None:
            return
        if not mig.startswith("postgresql") or self.is_sqlite:
            raise ValueError(
                "NEURULES_MIGRATION_DATABASE_URL is for PostgreSQL with NEURULES_DATABASE_URL on the same database "
                "(SQLite has no roles: leave it unset)"
            )
        if _url_part(mig, "database", "MIGRATION_DATABASE_URL") != _url_part(db, "database", "DATABASE_URL"):
            raise ValueError(
                "NEURULES_MIGRATION_DATABASE_URL must name the same database as NEURULES_DATABASE_URL "
                "(only the role differs)"
            )

    @property
    def resolved_migration_database_url(self) -> str:
        """The URL migrations run with (the tables' owner), defaulting to the service's own."""
        return self.migration_database_url or self.resolved_database_url

    @property
    def app_role(self) -> str | None:
        """The service's role when it differs from the migration role (PostgreSQL): migrations grant it its rights."""
        if self.migration_database_url is None:
            return None
        app = _url_part(self.resolved_database_url, "username", "DATABASE_URL")
        owner = _url_part(self.migration_database_url, "username", "MIGRATION_DATABASE_URL")
        return app if app and app != owner else None

    @property
    def resolved_broker_url(self) -> str:
        """The broker URL, defaulting to the filesystem broker under data_dir."""
        return self.broker_url or "filesystem://"

    @property
    def broker_dir(self) -> Path:
        """Folder of the filesystem broker."""
        return self.data_dir / "broker"

    @property
    def run_embedded_worker(self) -> bool:
        """Whether the API process runs a Celery worker thread."""
        return self.embedded_worker if self.embedded_worker is not None else self.mode == "embedded"

    @property
    def required_workers(self) -> int:
        """Live training workers /readyz needs: the embedded one in embedded mode; none by default when distributed.

        A distributed API serves predictions without any training worker, so a fleet scaled to zero must not
        take the API out of its load balancer; set NEURULES_READY_MIN_WORKERS where training must be available.
        """
        if self.ready_min_workers is not None:
            return self.ready_min_workers
        return 1 if self.run_embedded_worker else 0

    @property
    def worker_alive_s(self) -> float:
        """A worker whose heartbeat row is older than this (three missed beats) no longer counts as live."""
        return 3 * self.heartbeat_interval_s

    @property
    def resolved_train_threads(self) -> int | None:
        """Torch threads for training (embedded mode leaves cores for the API), None = torch's default."""
        if self.train_threads is not None:
            return self.train_threads
        if self.run_embedded_worker:
            return max(1, (os.cpu_count() or 2) // 2)
        return None

    @property
    def is_sqlite(self) -> bool:
        """Whether the database is SQLite."""
        return self.resolved_database_url.startswith("sqlite")


def _url_part(url: str, part: str, variable: str) -> str | None:
    """One part (username, database) of a database URL; ValueError naming the variable when it does not parse."""
    try:
        value: str | None = getattr(make_url(url), part)
    except Exception:  # noqa: BLE001 -- sqlalchemy raises several kinds for a malformed URL
        raise ValueError(f"NEURULES_{variable} is not a valid database URL") from None
    return value


def _check_broker_url(url: str) -> None:
    """ValueError naming NEURULES_BROKER_URL when it cannot be a broker address (no scheme, a port that is no
    number): a malformed address never comes right, unlike a broker that is down (which /readyz reports)."""
    from urllib.parse import urlsplit

    for one in url.split(";"):  # Celery's failover list: `sentinel://h1:26379;sentinel://h2:26379`
        if "://" not in one or not urlsplit(one).scheme:
            raise ValueError("NEURULES_BROKER_URL is not a valid broker URL (e.g. redis://host:6379/0): no scheme://")
        try:
            parts = urlsplit(one)
            parts.port  # noqa: B018 -- raises ValueError for a port that is no number
        except ValueError:
            if "," not in parts.netloc:  # `redis://h1:6379,h2:6379`: several hosts, which kombu reads itself
                raise ValueError("NEURULES_BROKER_URL is not a valid broker URL (e.g. redis://host:6379/0)") from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read once from the environment)."""
    return Settings()  # values come from the environment
