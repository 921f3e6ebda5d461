"""`neurules-admin`: serve, migrate, tenants and API keys, reaper sweep, worker.

`neurules-admin serve` with no environment starts the embedded service: SQLite under ./var,
migrations applied, a Celery worker thread on the filesystem broker, http://127.0.0.1:8000.
Set NEURULES_MODE=distributed, NEURULES_DATABASE_URL and NEURULES_BROKER_URL for the
distributed mode (and run `neurules-admin worker` on each worker machine).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select


def _migrations_dir() -> Path:
    """The Alembic folder: beside the package (source checkout, editable install) or in the working directory."""
    candidates = (Path(__file__).resolve().parent.parent / "migrations", Path.cwd() / "migrations")
    return next((c for c in candidates if (c / "env.py").exists()), candidates[0])


MIGRATIONS = _migrations_dir()


def _settings(**overrides: Any) -> Any:
    from app.settings import Settings

    try:
        return Settings(**overrides)
    except ValidationError as e:
        msgs = "; ".join(err["msg"].removeprefix("Value error, ") for err in e.errors())
        sys.exit(f"neurules-admin: invalid configuration: {msgs}")


def migrate(url: str) -> None:
    """Apply every Alembic migration to the database at `url`."""
    from alembic import command
    from alembic.config import Config

    from app.db import make_engine

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["configure_logging"] = False
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
    finally:
        engine.dispose()


def create_tenant(url: str, name: str) -> str:
    """Create a tenant; returns its id."""
    from app.db import Database
    from app.tables import Tenant, new_id

    db = Database(url)
    try:
        with db.session() as s:
            if s.scalar(select(Tenant).where(Tenant.name == name)) is not None:
                raise SystemExit(f"neurules-admin: tenant {name!r} already exists")
            t = Tenant(id=new_id("tn"), name=name)
            s.add(t)
        return t.id
    finally:
        db.dispose()


def create_key(url: str, tenant: str, label: str = "") -> tuple[str, str]:
    """Create an API key for a tenant (by name or id); returns (key id, the key shown once)."""
    from app.db import Database
    from app.services import keys
    from app.tables import ApiKey, Tenant, new_id

    db = Database(url)
    try:
        with db.session() as s:
            t = s.scalar(select(Tenant).where((Tenant.name == tenant) | (Tenant.id == tenant)))
            if t is None:
                raise SystemExit(f"neurules-admin: no tenant {tenant!r}; create it with create-tenant")
            key, prefix = keys.generate_key()
            row = ApiKey(id=new_id("key"), tenant_id=t.id, prefix=prefix, key_hash=keys.hash_key(key), label=label)
            s.add(row)
        return row.id, key
    finally:
        db.dispose()


def revoke_key(url: str, key_id: str) -> None:
    """Revoke an API key by id."""
    from app.db import Database
    from app.tables import ApiKey, utcnow

    db = Database(url)
    try:
        with db.session() as s:
            row = s.get(ApiKey, key_id)
            if row is None:
                raise SystemExit(f"neurules-admin: no key {key_id!r}")
            row.revoked_at = utcnow()
    finally:
        db.dispose()


def list_tenants(url: str) -> list[dict[str, Any]]:
    """Tenants with their keys (ids, labels, revocation; never the keys)."""
    from app.db import Database
    from app.tables import ApiKey, Tenant

    db = Database(url)
    try:
        with db.session() as s:
            out = []
            for t in s.scalars(select(Tenant).order_by(Tenant.name)):
                ks = s.scalars(select(ApiKey).where(ApiKey.tenant_id == t.id)).all()
                out.append(
                    {
                        "id": t.id,
                        "name": t.name,
                        "keys": [{"id": k.id, "label": k.label, "revoked": k.revoked_at is not None} for k in ks],
                    }
                )
            return out
    finally:
        db.dispose()


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket with SO_REUSEPORT, so each server process has its own listener."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if hasattr(socket, "SO_REUSEPORT"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def port_in_use(host: str, port: int) -> bool:
    """Whether something already accepts connections on host:port (SO_REUSEPORT would share it silently)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _serve_process(index: int, host: str, port: int) -> None:
    """One server process: its own SO_REUSEPORT listener, uvloop + httptools (TCP_NODELAY on)."""
    import uvicorn

    from app.main import create_app

    overrides: dict[str, Any] = {}
    if index > 0:
        overrides["embedded_worker"] = False  # one embedded worker per service, in process 0
    settings = _settings(**overrides)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        lifespan="on",
        access_log=False,
        log_config=None,
        timeout_keep_alive=30,
        server_header=False,
    )
    server = uvicorn.Server(config)
    sock = reuseport_socket(host, port)
    server.run(sockets=[sock])


def serve(host: str, port: int, workers: int, run_migrations: bool) -> None:
    """Apply migrations, then run `workers` server processes on host:port."""
    from app.observability import configure_logging

    settings = _settings()
    configure_logging(settings.log_level)
    if port_in_use(host, port):
        sys.exit(f"neurules-admin: {host}:{port} is already in use (another server?); pick another --port")
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if run_migrations and settings.migrate_on_start:
        migrate(settings.resolved_database_url)
    import logging

    logging.getLogger("neurules.cli").info(
        f"serving on http://{host}:{port} (docs at /docs; {workers} process(es); {settings.mode} mode)",
        extra={
            "database": settings.resolved_database_url.split("@")[-1],
            "broker": settings.resolved_broker_url.split("@")[-1],
            "embedded_worker": settings.run_embedded_worker,
        },
    )
    if workers <= 1:
        _serve_process(0, host, port)
        return
    prom_dir = settings.data_dir / "prometheus"
    shutil.rmtree(prom_dir, ignore_errors=True)
    prom_dir.mkdir(parents=True)
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(prom_dir))  # /metrics aggregates every process
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_serve_process, args=(i, host, port), name=f"neurules-api-{i}") for i in range(workers)]
    for p in procs:
        p.start()
    stopping = False

    def _stop(signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    while not stopping and all(p.is_alive() for p in procs):
        time.sleep(0.5)
    if not stopping:  # a server process died: stop the others and let the supervisor restart us
        _stop(signal.SIGTERM, None)
    for p in procs:
        p.join(30)
    codes = [p.exitcode for p in procs]
    if any(c not in (0, -signal.SIGTERM) for c in codes):
        sys.exit(f"neurules-admin: server processes exited with {codes}")


def run_worker(extra: Sequence[str]) -> None:
    """Run a Celery worker process for the training queue (solo pool: one job at a time, GPU-friendly)."""
    settings = _settings()
    from app.observability import configure_logging
    from worker.celery_app import make_celery

    configure_logging(settings.log_level)
    app = make_celery(settings)
    argv = [
        "worker",
        "-P",
        "solo",
        "-Q",
        settings.queue,
        "--without-mingle",
        "--without-gossip",
        "-l",
        settings.log_level,
        *extra,
    ]
    app.worker_main(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `neurules-admin` console script."""
    p = argparse.ArgumentParser(
        prog="neurules-admin", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("serve", help="run the API (embedded mode by default)")
    sp.add_argument("--host", default=None)
    sp.add_argument("--port", type=int, default=None)
    sp.add_argument("--workers", type=int, default=None, help="server processes (one per core is best)")
    sp.add_argument("--no-migrate", action="store_true", help="do not apply migrations on start")
    sub.add_parser("migrate", help="apply database migrations")
    sp = sub.add_parser("create-tenant", help="create a tenant")
    sp.add_argument("name")
    sp = sub.add_parser("create-key", help="create an API key for a tenant; prints it once")
    sp.add_argument("tenant", help="tenant name or id")
    sp.add_argument("--label", default="")
    sp = sub.add_parser("revoke-key", help="revoke an API key by id (effective within NEURULES_AUTH_CACHE_TTL_S)")
    sp.add_argument("key_id")
    sub.add_parser("list-tenants", help="tenants and their key ids (as JSON)")
    sub.add_parser("reap", help="requeue or fail running jobs whose worker vanished")
    sp = sub.add_parser("worker", help="run a Celery training worker (distributed mode)")
    sp.add_argument("celery_args", nargs=argparse.REMAINDER, help="extra celery worker arguments")
    sub.add_parser("config", help="print the effective configuration (validated)")
    args = p.parse_args(argv)

    if args.cmd == "serve":
        s = _settings()
        serve(args.host or s.host, args.port or s.port, args.workers or s.workers, not args.no_migrate)
        return
    settings = _settings()
    url = settings.resolved_database_url
    if settings.is_sqlite and args.cmd in ("create-tenant", "create-key", "list-tenants", "revoke-key"):
        migrate(url)  # embedded mode: the admin commands work before the first `serve`
    if args.cmd == "migrate":
        migrate(url)
        print(f"migrated {settings.mode} database to head")
    elif args.cmd == "create-tenant":
        print(create_tenant(url, args.name))
    elif args.cmd == "create-key":
        key_id, key = create_key(url, args.tenant, args.label)
        print(key)
        print(f"key id {key_id}; store the key now, it is not shown again", file=sys.stderr)
    elif args.cmd == "revoke-key":
        revoke_key(url, args.key_id)
        print(
            f"revoked {args.key_id} (running servers refuse it within NEURULES_AUTH_CACHE_TTL_S = "
            f"{settings.auth_cache_ttl_s:g} s)"
        )
    elif args.cmd == "list-tenants":
        print(json.dumps(list_tenants(url), indent=2))
    elif args.cmd == "reap":
        from app.db import Database
        from worker.celery_app import make_celery
        from worker.tasks import reap_and_requeue

        db = Database(url)
        actions = reap_and_requeue(db, settings, make_celery(settings))
        print(json.dumps([a.__dict__ for a in actions]))
    elif args.cmd == "worker":
        run_worker(args.celery_args)
    elif args.cmd == "config":
        d = settings.model_dump(mode="json")
        d.update(
            database_url=url,
            broker_url=settings.resolved_broker_url,
            embedded_worker=settings.run_embedded_worker,
            pid=os.getpid(),
        )
        print(json.dumps(d, indent=2))


if __name__ == "__main__":
    main()
