"""`neurules-admin serve`: N server processes, each with its own SO_REUSEPORT listener (uvloop + httptools)."""

from __future__ import annotations

import logging
import multiprocessing
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

from app.admin import SchemaAhead, migrate
from app.observability import configure_logging
from app.process_tuning import tune_server_process
from app.settings import Settings
from worker import database_lock


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


def listen_problem(host: str, port: int, e: OSError) -> str:
    """Why host:port cannot be listened on, in one line (unknown host, port taken, no permission)."""
    why = e.strerror or str(e)
    return f"neurules-admin: cannot listen on {host}:{port}: {why}; check --host and --port (or NEURULES_HOST/_PORT)"


def check_listen(host: str, port: int) -> None:
    """Exit with one line unless a listener can be bound on host:port (closed again at once: with SO_REUSEPORT a
    listener that is never served would take its share of the connections)."""
    try:
        reuseport_socket(host, port).close()
    except OSError as e:  # socket.gaierror (an unknown host) is one too
        sys.exit(listen_problem(host, port, e))


def port_in_use(host: str, port: int) -> bool:
    """Whether something already accepts connections on host:port (SO_REUSEPORT would share it silently)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def process_settings(index: int, settings: Settings) -> Settings:
    """The settings of server process `index`: one embedded worker per service, in process 0, and every process's
    /readyz needing the same live workers (the others said ready with process 0's worker dead while process 0 said
    unready: a load balancer saw readiness flap by the process that answered)."""
    if index == 0:
        return settings
    return settings.model_copy(update={"embedded_worker": False, "ready_min_workers": settings.required_workers})


def _serve_process(index: int, host: str, port: int, settings: Settings, lock: Any = None) -> None:
    """One server process: its own SO_REUSEPORT listener, uvloop + httptools (TCP_NODELAY on); `lock` (process 0):
    the database's lock, handed over by the supervisor (`database_lock.handoff`), held by both."""
    import uvicorn

    from worker.http_guard import guarded_protocol
    from worker.service import build_service

    settings = process_settings(index, settings)
    try:
        app = build_service(settings)
    except database_lock.DatabaseInUse as e:  # another service took the database since `serve` checked it
        sys.exit(f"neurules-admin: {e}")
    # predict.csv's numeric chunks are typed by pandas: import it now (~0.4 s holding the GIL), not while
    # the first CSV of a busy process stalls its event loop; then it is frozen with the start-up heap
    import pandas  # noqa: F401

    tune_server_process()  # after the imports and the app are built: GC and GIL policy (see app.process_tuning)
    config = uvicorn.Config(
        app,
        loop="uvloop",
        http=guarded_protocol(settings.max_header_bytes, settings.request_stall_s),
        ws="none",  # no websocket route: an Upgrade is ignored (worker.http_guard), never handed to a library
        lifespan="on",
        access_log=False,
        log_config=None,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=settings.shutdown_grace_s,  # a trickling upload held a SIGTERM for minutes
        server_header=False,
    )
    server = uvicorn.Server(config)
    try:
        sock = reuseport_socket(host, port)
    except OSError as e:  # taken since `serve` checked it
        sys.exit(listen_problem(host, port, e))
    server.run(sockets=[sock])
    if not server.started:  # uvicorn returns normally when the application's start-up failed
        sys.exit("neurules-admin: the server did not start (see the log above)")


def serve(settings: Settings, host: str, port: int, workers: int, run_migrations: bool) -> None:
    """Apply migrations, then run `workers` server processes on host:port."""
    configure_logging(settings.log_level)
    if port_in_use(host, port):
        sys.exit(
            f"neurules-admin: {host}:{port} is already in use (another server?); "
            "pick another --port (NEURULES_PORT for make run)"
        )
    check_listen(host, port)  # before the lock and the migrations: a bad address changes nothing
    try:
        settings.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)  # every tenant's data
    except OSError as e:
        sys.exit(f"neurules-admin: cannot create the data folder {settings.data_dir}: {e.strerror}")
    lock = _lock_database(settings)
    if run_migrations and settings.migrate_on_start:
        try:
            migrate(settings.resolved_migration_database_url, app_role=settings.app_role)
        except SchemaAhead as e:  # a rolling upgrade migrated first, or a rollback to this release: serve on it
            logging.getLogger("neurules.cli").warning(str(e))
    logging.getLogger("neurules.cli").info(
        f"serving on http://{host}:{port} (docs at /docs; {workers} process(es); {settings.mode} mode)",
        extra={
            "database": settings.resolved_database_url.split("@")[-1],
            "broker": settings.resolved_broker_url.split("@")[-1],
            "embedded_worker": settings.run_embedded_worker,
        },
    )
    if workers <= 1:
        _serve_process(0, host, port, settings)
        return
    prom_dir = metrics_folder(settings.data_dir / "prometheus")
    os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(prom_dir))  # /metrics aggregates every process
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(
            target=_serve_process,
            # process 0 runs the embedded worker: it shares the supervisor's lock, so it is never free meanwhile
            args=(i, host, port, settings, database_lock.handoff(lock) if lock is not None and i == 0 else None),
            name=f"neurules-api-{i}",
        )
        for i in range(workers)
    ]
    for p in procs:
        p.start()
    _supervise(procs, settings.shutdown_grace_s)


def metrics_folder(root: Path) -> Path:
    """This supervisor's own, empty folder for its processes' metric files (`<root>/<host>-<pid>`), after removing
    those of this host's supervisors no longer running. One folder for every service on the data folder: a second
    `serve --workers N` (an API-only service beside the first) wiped the first one's files, whose counters vanished
    and stayed gone; the host in the name keeps two containers (each its supervisor at pid 1) apart."""
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    host = socket.gethostname()
    for old in root.iterdir():
        name, _, pid = old.name.rpartition("-")
        if old.is_dir() and name == host and pid.isdigit() and not _running(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    mine = root / f"{host}-{os.getpid()}"
    shutil.rmtree(mine, ignore_errors=True)
    mine.mkdir()
    return mine


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _exit_text(code: int | None) -> str:
    """How a process ended, in words (`-9`: killed by SIGKILL)."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _lock_database(settings: Settings) -> Path | None:
    """Fail fast, before migrating, when another service runs an embedded worker on this SQLite database; else
    hold its lock (see `worker.database_lock`). The lock file, or None when nothing is locked."""
    if not settings.run_embedded_worker:
        return None
    try:
        return database_lock.acquire(settings)
    except database_lock.DatabaseInUse as e:
        sys.exit(f"neurules-admin: {e}")
    except OSError as e:  # a read-only or full file system: one line naming the file, not a traceback
        sys.exit(
            f"neurules-admin: cannot take the database's lock ({e.filename}: {e.strerror}); the folder of the "
            "database must be writable"
        )


def _supervise(procs: Sequence[BaseProcess], grace_s: float) -> None:
    """Forward SIGTERM/SIGINT to the server processes; when one dies, stop the others and exit non-zero."""
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
    died = not stopping  # a server process ended while nobody asked the service to stop
    if died:  # stop the others and let the supervisor restart us
        gone = [(i, p) for i, p in enumerate(procs) if not p.is_alive()]
        logging.getLogger("neurules.cli").error(
            "server process ended on its own: stopping the others; restart the service",
            extra={"processes": [{"process": i, "pid": p.pid, "exit": _exit_text(p.exitcode)} for i, p in gone]},
        )
        _stop(signal.SIGTERM, None)
    for p in procs:
        p.join(grace_s + 30)  # each finishes its requests in flight first (NEURULES_SHUTDOWN_GRACE_S)
    codes = [p.exitcode for p in procs]
    if died or any(c not in (0, -signal.SIGTERM) for c in codes):
        # non-zero even when the one that ended was stopped cleanly (a SIGTERM sent to it alone): the service
        # did not stop on request, so a manager restarting on failure must restart it
        ended = ", ".join(f"process {i} (pid {p.pid}): {_exit_text(p.exitcode)}" for i, p in enumerate(procs))
        sys.exit(f"neurules-admin: server processes exited with {codes}: {ended}")
