"""PostgreSQL roles: the service's least-privilege app role and its grants (SQLite has no roles).

Migrations run as the owner of the tables; the service connects as an app role that owns nothing,
may not run DDL or TRUNCATE, may only INSERT and SELECT the audit log, the registry events and the
training history (SELECT, INSERT, UPDATE the audit chain heads, which the writer moves) and has full DML
on every other table. `grant_app_role` sets
exactly these rights (revoking anything else first), so running it after every migration keeps
them right as tables are added.
"""

from __future__ import annotations

from sqlalchemy import Connection, inspect, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from app.tables import AuditChainHead, AuditRecord, Base, JobProgressPoint, RegistryEvent

APPEND_ONLY = {
    AuditRecord.__tablename__: "SELECT, INSERT",
    AuditChainHead.__tablename__: "SELECT, INSERT, UPDATE",
    RegistryEvent.__tablename__: "SELECT, INSERT",  # who moved which alias: kept as written
    JobProgressPoint.__tablename__: "SELECT, INSERT",  # the training history: appended, never changed
}
READ_ONLY = {"alembic_version": "SELECT"}
FULL_DML = "SELECT, INSERT, UPDATE, DELETE"


class RoleError(Exception):
    """The app role cannot be set up as asked (missing, the owner itself, a superuser, or an owner of tables)."""


def url_role(url: str) -> str | None:
    """The role a database URL connects as (None when it names none)."""
    return make_url(url).username


def table_rights() -> dict[str, str]:
    """The app role's privileges per table: append-only audit, read-only migration bookkeeping, full DML elsewhere."""
    rights = dict.fromkeys(Base.metadata.tables, FULL_DML)
    return {**rights, **APPEND_ONLY, **READ_ONLY}


def grant_statements(role: str, existing_tables: set[str]) -> list[str]:
    """The statements that give `role` exactly its rights on the tables that exist (anything else revoked)."""
    q = _quote(role)
    stmts = [
        f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {q}",
        f"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {q}",
        f"REVOKE CREATE ON SCHEMA public FROM {q}",
        f"GRANT USAGE ON SCHEMA public TO {q}",
    ]
    stmts += [
        f"GRANT {rights} ON TABLE {_quote(table)} TO {q}"
        for table, rights in sorted(table_rights().items())
        if table in existing_tables
    ]
    stmts.append(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {q}")  # nextval for audit_log.id, no setval
    return stmts


ROLE_RIGHTS = ("REPLICATION", "BYPASSRLS", "CREATEROLE", "CREATEDB")  # pg_roles' columns, in check_app_role's order
CREATED_ROLE_ATTRIBUTES = "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def check_app_role(conn: Connection, role: str) -> None:
    """RoleError unless `role` exists, is not the connected (owner) role, holds none of the rights a service role
    must not have (superuser, replication, bypassing row security, creating roles or databases) and owns no
    table."""
    if role == conn.execute(text("SELECT current_user")).scalar_one():
        raise RoleError(f"the app role {role!r} is the role migrations run as; give the service its own role")
    found = conn.execute(
        text(
            "SELECT rolsuper, rolreplication, rolbypassrls, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = :r"
        ),
        {"r": role},
    ).first()
    if found is None:
        raise RoleError(f"the app role {role!r} does not exist; create it with `neurules-admin create-app-role`")
    if found.rolsuper:
        raise RoleError(f"the app role {role!r} is a superuser; the service must run as an ordinary role")
    if extra := [name for name, held in zip(ROLE_RIGHTS, found[1:], strict=True) if held]:
        raise RoleError(
            f"the app role {role!r} holds {', '.join(extra)}; the service must run as an ordinary role "
            f"(as a superuser: ALTER ROLE {role} {' '.join('NO' + name for name in extra)})"
        )
    owned = conn.execute(
        text("SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tableowner = :r ORDER BY 1"), {"r": role}
    ).scalars()
    if names := list(owned):
        raise RoleError(
            f"the app role {role!r} owns {', '.join(names)}; hand them to the migration role first "
            f"(as it: REASSIGN OWNED BY {role} TO CURRENT_USER)"
        )


def grant_app_role(conn: Connection, role: str) -> list[str]:
    """Check the app role and give it exactly its rights on the tables that exist; the statements run."""
    check_app_role(conn, role)
    stmts = [_grant_connect(conn, role), *grant_statements(role, set(inspect(conn).get_table_names(schema="public")))]
    for stmt in stmts:
        conn.execute(text(stmt))
    if conn.execute(text("SELECT has_schema_privilege(:r, 'public', 'CREATE')"), {"r": role}).scalar_one():
        raise RoleError(  # PostgreSQL 14 and older let PUBLIC create in schema public
            f"the app role {role!r} can still CREATE in schema public (through PUBLIC); as the owner run "
            "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
        )
    return stmts


def _grant_connect(conn: Connection, role: str) -> str:
    """GRANT CONNECT on this database (in case PUBLIC's was revoked), quoted by the server."""
    sql = "SELECT format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), CAST(:r AS text))"
    return str(conn.execute(text(sql), {"r": role}).scalar_one())


def create_app_role(conn: Connection, role: str, password: str | None) -> bool:
    """Create `role` as a plain login role (or set its password); True when it was created; RoleError naming the
    server's refusal."""
    found = conn.execute(
        text("SELECT rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = :r"), {"r": role}
    ).first()
    exists = found is not None
    # An existing role is given LOGIN and its password, and loses CREATEDB / CREATEROLE only where it holds
    # them: naming an attribute in an ALTER takes that right (a superuser for NOSUPERUSER, NOREPLICATION,
    # NOBYPASSRLS; CREATEDB for NOCREATEDB from PostgreSQL 16) even where nothing changes, and an owner with
    # CREATEROLE is all this needs. grant_app_role then refuses a role that still holds a right it must not.
    if found is None:
        attributes = f"LOGIN {CREATED_ROLE_ATTRIBUTES}"
    else:
        attributes = " ".join(
            [
                "LOGIN",
                *(["NOCREATEDB"] if found.rolcreatedb else []),
                *(["NOCREATEROLE"] if found.rolcreaterole else []),
            ]
        )
    # format(%I, %L) quotes the name and the password on the server; DDL takes no bind parameters
    stmt = conn.execute(
        text(
            "SELECT format('%s ROLE %I ', CAST(:verb AS text), CAST(:r AS text)) || CAST(:attrs AS text) || "
            "CASE WHEN CAST(:p AS text) IS NULL THEN '' ELSE format(' PASSWORD %L', CAST(:p AS text)) END"
        ),
        {"verb": "ALTER" if exists else "CREATE", "r": role, "attrs": attributes, "p": password},
    ).scalar_one()
    try:
        conn.execute(text(stmt))
    except DBAPIError as e:
        cause = str(e.orig).strip() if e.orig is not None else str(e)
        raise RoleError(f"could not {'alter' if exists else 'create'} the app role {role!r}: {cause}") from e
    return not exists
