"""`neurules-admin`: serve, migrate, the app role, tenants, their policy and API keys, audit verification, reaper
sweep, worker.

`neurules-admin serve` with no environment starts the embedded service: SQLite under ./var,
migrations applied, a Celery worker thread on the filesystem broker, http://127.0.0.1:8000.
Set NEURULES_MODE=distributed, NEURULES_DATABASE_URL and NEURULES_BROKER_URL for the
distributed mode (and run `neurules-admin worker` on each worker machine).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError, OperationalError

from app import admin
from app.db import sqlite_path
from app.db_roles import RoleError
from app.schemas.audit import AuditVerification
from app.services import key_scopes
from app.services.audit_verify import ChainReport
from app.services.errors import Conflict, DomainError, NotFound
from app.settings import Settings

# embedded mode: these create a new database's schema, and refuse one behind this release (`prepare_embedded`);
# verify-audit never creates one, and refuses one behind (`nothing_to_verify`)
ADMIN_COMMANDS_THAT_MIGRATE = (
    "create-tenant",
    "create-key",
    "list-tenants",
    "revoke-key",
    "bind-model-names",
    "set-policy",
)
COMMANDS_THAT_CREATE = ("create-tenant",)  # the first command on a new machine: it makes the embedded database
COMMANDS_AS_OWNER = ("migrate", "create-app-role")  # they connect with NEURULES_MIGRATION_DATABASE_URL
SERVE_FLAGS = ("host", "port", "workers")  # `serve` flags that override the settings of the same name
# "undefined table / column" (PostgreSQL's SQLSTATEs, SQLite's messages): the schema is missing or older
NOT_MIGRATED_SQLSTATES = ("42P01", "42703")
NOT_MIGRATED_SQLITE = ("no such table", "no such column")


def load_settings(**overrides: Any) -> Settings:
    """The validated settings (`overrides`: command-line flags, checked like the variables), or exit with the
    problems in words."""
    try:
        return Settings(**overrides)
    except ValidationError as e:
        msgs = "; ".join(_config_problem(err, overrides) for err in e.errors())
        sys.exit(f"neurules-admin: invalid configuration: {msgs}")


def _config_problem(err: Any, flags: Mapping[str, Any]) -> str:
    """One settings error in words, naming the flag or environment variable when it is about one setting."""
    msg = str(err["msg"]).removeprefix("Value error, ")
    loc = err.get("loc") or ()
    if not loc:
        return msg
    name = str(loc[0])
    return f"--{name.replace('_', '-')} {flags[name]}: {msg}" if name in flags else f"NEURULES_{name.upper()}: {msg}"


def flag_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command's flags give (`serve --port` ...); flags left out are not overrides."""
    return {name: getattr(args, name) for name in SERVE_FLAGS if getattr(args, name, None) is not None}


def database_problem(e: DBAPIError, url: str) -> str:
    """A database error in one line: which database, what is wrong and, where it is clear, what to do."""
    where = _hide_password(url)
    orig = e.orig
    reason = (str(orig) or orig.__class__.__name__).strip().splitlines()[0]
    if isinstance(e, OperationalError) and (e.statement is None or e.connection_invalidated):
        return f"cannot reach the database at {where}: {reason}"
    sqlstate = getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None)
    if sqlstate in NOT_MIGRATED_SQLSTATES or reason.startswith(NOT_MIGRATED_SQLITE):
        return f"the database at {where} is not migrated ({reason}): run `neurules-admin migrate`"
    return f"the database at {where} refused the command ({orig.__class__.__name__}): {reason}"


def run_worker(settings: Settings, extra: Sequence[str]) -> None:
    """Run a Celery worker process for the training queue (solo pool: one job at a time, GPU-friendly)."""
    from app.observability import configure_logging
    from worker.celery_app import make_celery

    configure_logging(settings.log_level)
    behind = schema_behind(settings)
    if behind is not None:  # it would train whole jobs, then fail each storing its result
        sys.exit(f"neurules-admin worker: {behind}: run `neurules-admin migrate` first")
    argv = ["worker", "-P", "solo", "-Q", settings.queue, "--without-mingle", "--without-gossip"]
    make_celery(settings).worker_main([*argv, "-l", settings.log_level, *extra])


def schema_behind(settings: Settings) -> str | None:
    """Why the database's schema is behind this code (a worker upgraded before `migrate`), else None; a database
    that cannot be read now is not refused here (the worker waits for it, as for any outage)."""
    schema = admin.expected_schema()
    if schema is None:
        return None
    try:
        found = admin.schema_revision_of(settings.resolved_database_url)
    except (DBAPIError, sqlite3.Error, OSError):
        return None
    return schema.problem(found)


def reap(settings: Settings) -> list[dict[str, Any]]:
    """One reaper sweep; what it did to which job."""
    from app.db import Database
    from worker.celery_app import make_celery
    from worker.tasks import broker_scan_for, reap_and_requeue

    db = Database(settings.resolved_database_url, settings.sqlite_synchronous)
    app = make_celery(settings)
    try:
        return [a.__dict__ for a in reap_and_requeue(db, settings, app, scan=broker_scan_for(app, settings))]
    finally:
        db.dispose()


def effective_config(settings: Settings) -> dict[str, Any]:
    """The settings as JSON, with the values derived from them."""
    d = settings.model_dump(mode="json")
    d.update(
        database_url=_hide_password(settings.resolved_database_url),
        migration_database_url=_hide_password(settings.resolved_migration_database_url),
        app_role=settings.app_role,
        broker_url=_hide_broker_password(settings.resolved_broker_url),
        embedded_worker=settings.run_embedded_worker,
        ready_min_workers=settings.required_workers,
        pid=os.getpid(),
    )
    return d


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _hide_broker_password(url: str) -> str:
    """A broker URL with its password as *** (`redis://:secret@host/0`): `config` output goes into tickets and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if not parts.password:
        return url
    user, _, host = parts.netloc.rpartition("@")
    name = user.split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{name}:***@{host}"))


def migrate(settings: Settings) -> str:
    """Apply the migrations as the owner and grant the app role its rights; what was done, in words."""
    try:
        grants = admin.migrate(settings.resolved_migration_database_url, app_role=settings.app_role)
    except admin.SchemaAhead as e:
        return str(e)
    done = f"migrated {database_label(settings)} to head"  # the database, not the mode (PostgreSQL read "embedded")
    if settings.app_role:
        done += f"; granted role {settings.app_role!r} its rights ({len(grants)} statements)"
    return done


def create_app_role(settings: Settings, name: str | None, password_env: str | None) -> str:
    """Create (or re-password) the app role as the owner and grant it its rights; what was done, in words."""
    from sqlalchemy.engine import make_url

    if settings.is_sqlite:
        sys.exit("neurules-admin: SQLite has no roles; create-app-role is for PostgreSQL")
    app_url = make_url(settings.resolved_database_url)
    role = name or app_url.username
    if not role:
        sys.exit("neurules-admin: name the role, or put it in NEURULES_DATABASE_URL")
    password = os.environ.get(password_env) if password_env else app_url.password
    if password_env and password is None:
        sys.exit(f"neurules-admin: {password_env} is not set")
    created = admin.create_app_role(settings.resolved_migration_database_url, role, password)
    return f"{'created' if created else 'updated'} role {role!r} and granted it its rights"


def worker_alive(settings: Settings) -> int:
    """0 when a training worker on this host wrote its heartbeat row within three beats, else 1 (a container's
    health check: the row is written by the worker's own thread, so a hung or dead worker, or one that cannot
    reach the database, reads as unhealthy)."""
    import socket

    from app.db import Database
    from app.services import workers

    db = Database(settings.resolved_database_url, settings.sqlite_synchronous)
    try:
        with db.session() as s:
            names = workers.live_on_host(s, socket.gethostname(), within_s=settings.worker_alive_s)
    except Exception as e:  # noqa: BLE001 -- the database is away: the worker cannot take jobs either
        url = settings.resolved_database_url
        why = database_problem(e, url) if isinstance(e, DBAPIError) else f"{e.__class__.__name__}: {e}"
        print(f"neurules-admin: no heartbeat could be read: {why}", file=sys.stderr)  # one line, no SQL
        return 1
    finally:
        db.dispose()
    if not names:
        print(
            f"neurules-admin: no worker on {socket.gethostname()} wrote its heartbeat in the last "
            f"{settings.worker_alive_s:g} s",
            file=sys.stderr,
        )
        return 1
    print(json.dumps({"alive": names}))
    return 0


def nothing_to_verify(settings: Settings) -> str | None:
    """Why there is no audit to verify at the configured database (None: there is one): no file, an empty file,
    or a database no release of ours ever migrated. Creates nothing (a mistyped path must not pass as intact)."""
    url = settings.resolved_database_url
    path = sqlite_path(url)
    if path is not None:
        where = os.path.abspath(path)
        if not os.path.isfile(where):
            return f"no database at {where}: nothing to verify (check NEURULES_DATA_DIR / NEURULES_DATABASE_URL)"
        if os.path.getsize(where) == 0:
            return f"the database file {where} is empty: nothing to verify"
    try:
        revision = admin.schema_revision_of(url)
    except sqlite3.DatabaseError as e:  # not a SQLite file at all
        return f"{database_label(settings)} cannot be read as a database ({e}): nothing to verify"
    except DBAPIError as e:  # unreachable, refused: nothing was checked either
        return f"{database_problem(e, url)}: nothing to verify"
    if revision is None:
        return f"{database_label(settings)} holds no NeuRules schema (never migrated): nothing to verify"
    return _behind(settings, revision)  # (a schema behind: the queries below would fail on columns it lacks)


def _behind(settings: Settings, revision: str) -> str | None:
    """Why a database at `revision` is refused here: its schema behind this release (None: it is not)."""
    schema = admin.expected_schema()
    problem = schema.problem(revision) if schema is not None else None
    if problem is None:
        return None
    return (
        f"{database_label(settings)}: {problem}; nothing was done. Stop the releases serving on it that are older "
        "than this one, then run `neurules-admin migrate` (or start `neurules-admin serve`)"
    )


def verify_audit(settings: Settings, tenant: str | None) -> int:
    """Print one JSON report per tenant chain; the exit status: 0 when all are intact, 1 when one is broken,
    2 when nothing was checked (no database, an unknown tenant), so that a script never reads a typo as a broken
    chain, nor a wrong path as an intact one."""
    try:
        reports = admin.verify_audit(settings.resolved_database_url, tenant)
    except (NotFound, Conflict) as e:  # an unknown or ambiguous tenant: nothing was checked
        print(f"neurules-admin: {e.message}", file=sys.stderr)
        return 2
    for r in reports:
        print(json.dumps(operator_report(r)))
    broken = [r for r in reports if not r.intact]
    rows = sum(r.rows_checked for r in reports)
    events = sum(r.registry_events.events_checked for r in reports)
    summary = "intact" if not broken else f"BROKEN in {len(broken)} tenant(s)"
    print(
        f"audit chains of {len(reports)} tenant(s): {summary}; {rows} row(s) and {events} registry event(s) checked",
        file=sys.stderr,
    )
    return 1 if broken else 0


def operator_report(report: ChainReport) -> dict[str, Any]:
    """A tenant's verification as the API gives it, plus the storage `row_id` of each break (the operator's own
    database key, which the API leaves out: it numbers every tenant's rows together)."""
    out = AuditVerification.model_validate(report).model_dump(mode="json")
    if report.first_break is not None:
        out["first_break"]["row_id"] = report.first_break.row_id
    if report.registry_events.first_break is not None:
        out["registry_events"]["first_break"]["row_id"] = report.registry_events.first_break.row_id
    return out


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(
        prog="neurules-admin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        """A command whose own --help opens with what it does (it was blank but for usage)."""
        return sub.add_parser(name, help=help, description=help)

    sp = command("serve", help="run the API (embedded mode by default)")
    sp.add_argument("--host", default=None, help="address to listen on (default: NEURULES_HOST, 127.0.0.1)")
    sp.add_argument("--port", type=int, default=None, help="port to listen on (default: NEURULES_PORT, 8000)")
    sp.add_argument("--workers", type=int, default=None, help="server processes (one per core is best)")
    sp.add_argument("--no-migrate", action="store_true", help="do not apply migrations on start")
    command("migrate", help="apply database migrations (as the owner) and grant the app role its rights")
    sp = command("create-app-role", help="create the service's least-privilege PostgreSQL role (as the owner)")
    sp.add_argument("name", nargs="?", default=None, help="default: the user of NEURULES_DATABASE_URL")
    sp.add_argument(
        "--password-env", default=None, help="variable holding its password (default: NEURULES_DATABASE_URL's)"
    )
    sp = command(
        "verify-audit",
        help="check the audit hash chains; exit 1 at a broken link, 2 when nothing was checked (an unknown tenant, "
        "no database or one that cannot be read)",
    )
    sp.add_argument("--tenant", default=None, help="tenant name or id (default: every tenant)")
    sp = command(
        "backup",
        help="copy the embedded database, while the service runs, into a new self-contained file (SQLite's online "
        "backup; a cp of the file alone misses the newest commits), checked; prints each tenant's audit chain head",
    )
    sp.add_argument("dest", help="the new backup file")
    sp = command(
        "restore",
        help="with every service on this data folder stopped: put a checked backup in the database's place (the "
        "database replaced is kept beside it; the old write-ahead log is removed, never replayed onto the backup)",
    )
    sp.add_argument("backup", help="a file written by neurules-admin backup")
    command(
        "bind-model-names",
        help="record a name_bound registry event for each model whose events carry no name (made before migration "
        "0010): run once no older release serves on the database",
    )
    sp = command("create-tenant", help="create a tenant")
    sp.add_argument("name")
    sp = command("create-key", help="create an API key for a tenant; prints it once")
    sp.add_argument("tenant", help="tenant name or id")
    sp.add_argument("--label", default="")
    sp.add_argument(
        "--scope",
        choices=key_scopes.SCOPES,
        default=key_scopes.FULL,
        help="full: everything the tenant may do (default); predict: ask for decisions only (a backend's key); "
        "read: read everything, change nothing, no decisions (a reviewer's or auditor's key)",
    )
    sp = command(
        "set-policy",
        help="set a tenant's governance policy: with --require-approval on, an alias may point only at a version "
        "whose latest review approved it (list-tenants shows the policy)",
    )
    sp.add_argument("tenant", help="tenant name or id")
    sp.add_argument("--require-approval", choices=("on", "off"), required=True)
    sp = command("revoke-key", help="revoke an API key by id (effective within NEURULES_AUTH_CACHE_TTL_S)")
    sp.add_argument("key_id")
    command("list-tenants", help="tenants, their approval policy and their key ids (as JSON)")
    command("reap", help="requeue or fail running jobs whose worker vanished")
    sp = command("worker", help="run a Celery training worker (distributed mode)")
    sp.add_argument("celery_args", nargs=argparse.REMAINDER, help="extra celery worker arguments")
    command("worker-alive", help="exit 0 when a training worker on this host beat recently (health check)")
    command("config", help="print the effective configuration (validated)")
    return p


def database_label(settings: Settings) -> str:
    """Which database a command wrote to: the SQLite file's absolute path (./var depends on the working
    directory), else the URL without its password."""
    from sqlalchemy.engine import make_url

    url = make_url(settings.resolved_database_url)
    if settings.is_sqlite and url.database:
        return f"the embedded database {os.path.abspath(url.database)}"
    return f"database {url.render_as_string(hide_password=True)}"


def backup_or_restore(settings: Settings, cmd: str, file: Path) -> dict[str, Any]:
    """`backup` into `file`, or `restore` from it (`app.sqlite_backup`); what was written, or exit saying why."""
    from app import sqlite_backup
    from worker.database_lock import DatabaseInUse, acquire, release

    path = sqlite_path(settings.resolved_database_url)
    if path is None:
        sys.exit(
            f"neurules-admin: {cmd} is for the embedded database; {database_label(settings)} is a server database: "
            "use pg_dump / pg_restore (README, Backup and restore)"
        )
    target = Path(path).absolute()
    try:
        if cmd == "backup":
            done = sqlite_backup.backup(target, file.absolute())
            return {"backup": str(done.path), **_described(done)}
        try:
            lock = acquire(settings)
        except DatabaseInUse as e:
            sys.exit(f"neurules-admin: restore refused, nothing changed: {e}")
        try:
            done, kept = sqlite_backup.restore(file.absolute(), target)
        finally:
            if lock is not None:
                release(lock)
        return {
            "restored": str(target),
            "from": str(done.path),
            "replaced_kept_as": str(kept) if kept else None,
            **_described(done),
        }
    except sqlite_backup.BackupError as e:
        sys.exit(f"neurules-admin: {cmd}: {e}; nothing changed")


def _described(c: Any) -> dict[str, Any]:
    """A checked database file's size, schema and chain heads (record the heads outside the database)."""
    heads = [{"tenant_id": h.tenant_id, "seq": h.seq, "row_hash": h.row_hash} for h in c.heads]
    return {"bytes": c.size_bytes, "schema": c.schema, "integrity": "ok", "audit_chain_heads": heads}


def prepare_embedded(settings: Settings, cmd: str) -> None:
    """Give a new embedded database its schema (the admin commands work before the first `serve`); leave an
    existing one as it is, and exit when it is behind this release. Migrating it here changed the evidence
    database under a running older release (its alias moves then failed) and said nothing, even for a
    read-only `verify-audit`."""
    url = settings.resolved_database_url
    path = sqlite_path(url)
    if path is not None and not os.path.exists(path):
        found = None  # no database yet: create-tenant makes it
    else:
        try:
            found = admin.schema_revision_of(url)
        except (sqlite3.Error, OSError) as e:  # locked, not a database: never read as "no database" (and migrated)
            sys.exit(f"neurules-admin: {database_label(settings)} cannot be read now ({e}); nothing was done")
    if found is None and cmd in COMMANDS_THAT_CREATE:
        with contextlib.suppress(admin.SchemaAhead):
            admin.migrate(url)
        return
    # a mistyped path must not become a new, empty database that lists no tenant
    why = (
        f"{database_label(settings)} holds no NeuRules database: nothing to {cmd} (check NEURULES_DATA_DIR / "
        "NEURULES_DATABASE_URL; create-tenant makes a new one)"
        if found is None
        else _behind(settings, found)
    )
    if why is not None:
        print(f"neurules-admin: {why}", file=sys.stderr)
        sys.exit(2)  # nothing checked or changed


def run(args: argparse.Namespace, settings: Settings) -> None:
    """Carry out one parsed command."""
    url = settings.resolved_database_url
    if args.cmd == "verify-audit" and (why := nothing_to_verify(settings)) is not None:
        print(f"neurules-admin: {why}", file=sys.stderr)
        sys.exit(2)
    if settings.is_sqlite and args.cmd in ADMIN_COMMANDS_THAT_MIGRATE:
        prepare_embedded(settings, args.cmd)
    if args.cmd == "serve":
        from worker.serve import serve

        serve(settings, settings.host, settings.port, settings.workers, not args.no_migrate)
    elif args.cmd == "migrate":
        print(migrate(settings))
    elif args.cmd == "create-app-role":
        print(create_app_role(settings, args.name, args.password_env))
    elif args.cmd == "verify-audit":
        sys.exit(verify_audit(settings, args.tenant))
    elif args.cmd in ("backup", "restore"):
        print(
            json.dumps(backup_or_restore(settings, args.cmd, Path(args.dest if args.cmd == "backup" else args.backup)))
        )
    elif args.cmd == "bind-model-names":
        bound = admin.bind_model_names(url)
        for tenant_id, name in bound:
            print(json.dumps({"tenant_id": tenant_id, "model": name}))
        print(f"{len(bound)} model name(s) bound in {database_label(settings)}", file=sys.stderr)
    elif args.cmd == "create-tenant":
        print(admin.create_tenant(url, args.name))
        print(f"tenant {args.name!r} created in {database_label(settings)}", file=sys.stderr)
    elif args.cmd == "create-key":
        key_id, key = admin.create_key(url, args.tenant, args.label, args.scope)
        print(key)
        print(
            f"key id {key_id} in {database_label(settings)}; store the key now, it is not shown again",
            file=sys.stderr,
        )
    elif args.cmd == "revoke-key":
        before = admin.revoke_key(url, args.key_id)
        if before is not None:
            print(f"{args.key_id} was revoked already, at {before.isoformat()}: nothing changed")
        else:
            print(
                f"revoked {args.key_id} (running servers refuse it within NEURULES_AUTH_CACHE_TTL_S = "
                f"{settings.auth_cache_ttl_s:g} s)"
            )
    elif args.cmd == "set-policy":
        on = args.require_approval == "on"
        tenant_id, was_on, unapproved = admin.set_policy(url, args.tenant, on)
        if was_on == on:
            print(f"tenant {tenant_id}: require_approval was {args.require_approval} already: nothing changed")
        else:
            print(f"tenant {tenant_id}: require_approval {'on' if was_on else 'off'} -> {args.require_approval}")
        if on and unapproved:  # the gate checks alias moves: these were set before it and serve on
            print(f"warning: aliases on versions not approved serve until reviewed or moved: {', '.join(unapproved)}")
        if on:
            print(
                f"predict keys now decide only through aliases (within NEURULES_AUTH_CACHE_TTL_S = "
                f"{settings.auth_cache_ttl_s:g} s); releases before migration 0011 do not know the policy: "
                "run none of them on this database"
            )
    elif args.cmd == "list-tenants":
        print(json.dumps(admin.list_tenants(url), indent=2))
    elif args.cmd == "reap":
        print(json.dumps(reap(settings)))
    elif args.cmd == "worker":
        run_worker(settings, args.celery_args)
    elif args.cmd == "worker-alive":
        sys.exit(worker_alive(settings))
    elif args.cmd == "config":
        print(json.dumps(effective_config(settings), indent=2))


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `neurules-admin` console script."""
    args = parser().parse_args(argv)
    settings = load_settings(**flag_overrides(args))
    try:
        run(args, settings)
    except BrokenPipeError:  # `neurules-admin list-tenants | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        sys.exit(141)  # 128 + SIGPIPE, as a shell reports a filter ended by a closed pipe
    except (FileExistsError, NotADirectoryError, PermissionError) as e:  # the SQLite file's folder (a file there)
        sys.exit(
            f"neurules-admin: cannot use {e.filename}: {e.strerror} (check NEURULES_DATA_DIR / NEURULES_DATABASE_URL)"
        )
    except (DomainError, RoleError) as e:
        where = f" (in {database_label(settings)})" if isinstance(e, NotFound) else ""  # run elsewhere: another db
        sys.exit(f"neurules-admin: {getattr(e, 'message', e)}{where}")
    except DBAPIError as e:  # only the database's own errors: a bug elsewhere keeps its traceback
        owner = args.cmd in COMMANDS_AS_OWNER
        url = settings.resolved_migration_database_url if owner else settings.resolved_database_url
        sys.exit(f"neurules-admin: {database_problem(e, url)}")


if __name__ == "__main__":
    main()
