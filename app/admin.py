"""Administration on a database URL (migrations, roles, tenants, keys, audit checks) for `neurules-admin` and tests."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app import db_roles
from app.db import CONNECT_TIMEOUT_S, Database, make_engine, make_migration_engine, schema_revision, sqlite_path
from app.services import audit_verify, registry_events, reviews, tenants
from app.services.audit_verify import ChainReport
from app.services.errors import NotFound
from app.services.readiness import ExpectedSchema

T = TypeVar("T")


def _migrations_dir() -> Path:
    """The Alembic folder: beside the package (source checkout, editable install) or in the working directory."""
    candidates = (Path(__file__).resolve().parent.parent / "migrations", Path.cwd() / "migrations")
    return next((c for c in candidates if (c / "env.py").exists()), candidates[0])


MIGRATIONS = _migrations_dir()


@lru_cache(maxsize=1)
def expected_schema() -> ExpectedSchema | None:
    """The newest migration (the schema this code's tables are written for) and the revisions before it;
    None where the migrations are not installed beside the code (then /readyz cannot check the schema)."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    if not (MIGRATIONS / "env.py").exists():
        return None
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    script = ScriptDirectory.from_config(cfg)
    head = script.get_current_head()
    if head is None:
        return None
    older = frozenset(r.revision for r in script.walk_revisions() if r.revision != head)
    return ExpectedSchema(head, older)


def alembic_config() -> Any:
    """An Alembic configuration for this project's migrations, run on a connection the caller passes in
    (`attributes["connection"]`), leaving the logging as it is."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["configure_logging"] = False
    return cfg


class SchemaAhead(Exception):
    """The database is at a revision this code does not know: a newer release migrated it (nothing to do here)."""

    def __init__(self, found: str, head: str) -> None:
        super().__init__(
            f"the database schema is at revision {found}, newer than this release's {head}: not migrated "
            "(a newer release migrated it; this one runs on it, its migrations only add what older code ignores)"
        )
        self.found, self.head = found, head


def _newer_revision(conn: Any, cfg: Any) -> tuple[str, str] | None:
    """(the database's revision, this code's head) when the database is at a revision unknown here, else None."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(cfg)
    known = {rev.revision for rev in script.walk_revisions()}
    unknown = [r for r in MigrationContext.configure(conn).get_current_heads() if r not in known]
    return (unknown[0], str(script.get_current_head())) if unknown else None


def migrate(url: str, app_role: str | None = None) -> list[str]:
    """Apply every Alembic migration to the database at `url` (as the owner); then, on PostgreSQL, give
    `app_role` exactly its rights in the same transaction. The grant statements run. SchemaAhead when a newer
    release migrated the database (Alembic's own error was a traceback that stopped `serve`)."""
    from alembic import command

    cfg = alembic_config()
    engine = make_migration_engine(url)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            ahead = _newer_revision(conn, cfg)
            if ahead is not None:
                raise SchemaAhead(*ahead)
            command.upgrade(cfg, "head")
            if app_role is not None and conn.dialect.name == "postgresql":
                return db_roles.grant_app_role(conn, app_role)
    finally:
        engine.dispose()
    return []


def create_app_role(owner_url: str, role: str, password: str | None) -> bool:
    """Create (or re-password) the service's login role on PostgreSQL and grant it its rights; True if created."""
    engine = make_engine(owner_url)
    try:
        with engine.begin() as conn:
            created = db_roles.create_app_role(conn, role, password)
            db_roles.grant_app_role(conn, role)
    finally:
        engine.dispose()
    return created


def schema_revision_of(url: str) -> str | None:
    """The Alembic revision of the database at `url` (None: never migrated). Reads only: a SQLite file is opened
    read-only (the service's engine would switch it to WAL mode), PostgreSQL without the service's settings."""
    path = sqlite_path(url)
    if path is not None:
        with contextlib.closing(sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)) as raw:
            if raw.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchone() is None:
                return None
            row = raw.execute("SELECT version_num FROM alembic_version").fetchone()
            return None if row is None else str(row[0])
    server = make_url(url).get_backend_name() != "sqlite"  # (a SQLite URI: no connect timeout to give)
    engine = create_engine(url, connect_args={"connect_timeout": CONNECT_TIMEOUT_S} if server else {})
    try:
        with engine.connect() as conn:
            return schema_revision(conn)
    finally:
        engine.dispose()


def verify_audit(url: str, tenant: str | None = None) -> list[ChainReport]:
    """Check the audit chains (every tenant's, or one tenant's by name or id): one report per tenant."""
    db = Database(url)
    try:
        with db.session() as s:
            if tenant is None:
                return list(audit_verify.verify_all(s))
            found = tenants.find_tenant(s, tenant)  # by id, else by name; Conflict when it is both, of two tenants
            try:
                tenant_id = found.id if found is not None else audit_verify.resolve_tenant(s, tenant)
            except NotFound:  # pointing at the tenant it most likely meant, as create-key does
                hint = tenants.tenant_not_found(s, tenant).message
                raise NotFound(f"{hint} (and no audit chain for {tenant!r})") from None
            return [audit_verify.verify_tenant(s, tenant_id)]
    finally:
        db.dispose()


def bind_model_names(url: str) -> list[tuple[str, str]]:
    """Bind into its chain the name of every model whose events carry none (`registry_events.bind_names`), in one
    transaction: (tenant id, model name) of each model bound."""
    return _run(url, lambda s: [(rm.tenant_id, rm.name) for rm in registry_events.bind_names(s)])


def _run(url: str, action: Callable[[Session], T]) -> T:
    """Run `action` in one committed transaction on a database opened for it."""
    db = Database(url)
    try:
        with db.session() as s:
            return action(s)
    finally:
        db.dispose()


def create_tenant(url: str, name: str) -> str:
    """Create a tenant; returns its id (Conflict when the name is taken)."""
    return _run(url, lambda s: tenants.create_tenant(s, name)).id


def create_key(url: str, tenant: str, label: str = "", scope: str = "full") -> tuple[str, str]:
    """Create an API key for a tenant (by name or id) with a scope (`key_scopes`); returns (key id, the key shown
    once)."""
    row, key = _run(url, lambda s: tenants.create_key(s, tenant, label, scope))
    return row.id, key


def revoke_key(url: str, key_id: str) -> datetime | None:
    """Revoke an API key by id (NotFound when there is none); when it was revoked already, that time."""
    return _run(url, lambda s: tenants.revoke_key(s, key_id))


def set_policy(url: str, tenant: str, require_approval: bool) -> tuple[str, bool, list[str]]:
    """Set a tenant's (by name or id) approval policy (`reviews.set_policy`); (tenant id, the policy before, the
    aliases pointing at versions not approved, which go on serving until reviewed or moved)."""

    def action(s: Session) -> tuple[str, bool, list[str]]:
        found, before = reviews.set_policy(s, tenant, require_approval)
        return found.id, before, reviews.unapproved_aliases(s, found.id)

    return _run(url, action)


def list_tenants(url: str) -> list[dict[str, Any]]:
    """Tenants with their approval policy and their keys (ids, labels, revocation; never the keys)."""
    return _run(url, tenants.list_tenants)
