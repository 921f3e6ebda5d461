"""Servers for the serving benchmark: the floor app, the service embedded, the service distributed.

Each runs as its own process group (its session), so its CPU time and memory can be read from /proc
over the whole tree and it can be stopped as one. The distributed one gets a fresh database on the
PostgreSQL it is given and a queue name of its own on the Redis; both are removed afterwards
(the instances themselves are never stopped or reconfigured).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass
class Server:
    """A running server: its URL, API key (None for the floor) and process group."""

    name: str
    url: str
    key: str | None
    proc: subprocess.Popen[bytes]
    log: Path
    cleanups: list[Callable[[], None]] = field(default_factory=list)

    def stop(self) -> None:
        """Stop the process group, then run the clean-ups (temporary folder, database)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        for clean in reversed(self.cleanups):
            clean()

    def pids(self) -> list[int]:
        """Every live process of the server's session."""
        out = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError):
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if int(stat.rsplit(")", 1)[1].split()[3]) == self.proc.pid:
                        out.append(int(entry))
        return out

    def cpu_seconds(self) -> float:
        """User + system CPU seconds used so far by the server's live processes."""
        total = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        return total / CLK_TCK

    def memory_mib(self) -> dict[str, float]:
        """Largest current RSS and largest peak RSS (VmHWM) over the server's processes, MiB."""
        rss = hwm = 0
        for pid in self.pids():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        rss = max(rss, int(line.split()[1]))
                    elif line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
        return {"rss_mib": rss / 1024, "peak_rss_mib": hwm / 1024}


def free_port() -> int:
    """An unused TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SERVICE_ROOT = ROOT  # the checkout whose service is measured (`--service-root` measures another, e.g. main's)


def _base_env(root: Path = ROOT) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURULES_", "PROMETHEUS_"))}
    env["PYTHONPATH"] = str(root)  # that checkout's code, whatever the editable install points at
    return env


def _wait_ready(server: Server) -> None:
    for _ in range(300):
        if server.proc.poll() is not None:
            break
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{server.url}/readyz", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    server.stop()
    raise SystemExit(f"{server.name} did not start:\n" + server.log.read_text()[-3000:])


def _spawn(name: str, argv: list[str], env: dict[str, str], cwd: Path, port: int) -> Server:
    log = cwd / "server.log"
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(log, "wb"),  # noqa: SIM115 -- the child owns it
        start_new_session=True,
    )
    return Server(name, f"http://127.0.0.1:{port}", None, proc, log)


def start_floor(workers: int) -> Server:
    """The bare FastAPI floor app with `workers` SO_REUSEPORT processes."""
    tmp = tempfile.TemporaryDirectory(prefix="neurules-floor-")
    port = free_port()
    argv = [sys.executable, str(ROOT / "benchmarks" / "floor_app.py"), "--port", str(port), "--workers", str(workers)]
    server = _spawn(f"floor, {workers} processes", argv, _base_env(), Path(tmp.name), port)
    server.cleanups.append(tmp.cleanup)
    _wait_ready(server)
    return server


def _admin(env: dict[str, str], cwd: Path, *args: str) -> str:
    cmd = [sys.executable, "-m", "worker.cli", *args]
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"neurules-admin {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip()


def start_service(
    workers: int,
    extra_env: dict[str, str],
    *,
    distributed_pg: str | None,
    redis: str,
    program: Callable[[int], list[str]] | None = None,
) -> Server:
    """`neurules-admin serve --workers N` (or `program(port)`): embedded (SQLite) or, given a PostgreSQL URL,
    distributed."""
    tmp = tempfile.TemporaryDirectory(prefix="neurules-bench-")
    env = {**_base_env(SERVICE_ROOT), "NEURULES_LOG_LEVEL": "WARNING", **extra_env}
    cleanups: list[Callable[[], None]] = [tmp.cleanup]
    mode = "embedded"
    if distributed_pg is not None:
        mode = "distributed"
        url, drop = create_database(distributed_pg)
        cleanups.append(drop)
        queue = f"neurules-bench-{uuid.uuid4().hex[:10]}"
        env.update(NEURULES_MODE=mode, NEURULES_DATABASE_URL=url, NEURULES_BROKER_URL=redis, NEURULES_QUEUE=queue)
        cleanups.append(lambda: delete_redis_key(redis, queue))
    cwd = Path(tmp.name)
    _admin(env, cwd, "migrate")
    _admin(env, cwd, "create-tenant", "bench")
    key = _admin(env, cwd, "create-key", "bench")
    port = free_port()
    argv = [sys.executable, "-m", "worker.cli", "serve", "--port", str(port), "--workers", str(workers)]
    if program is not None:
        argv = program(port)
    server = _spawn(f"ours, {mode}, {workers} process{'es' if workers > 1 else ''}", argv, env, cwd, port)
    server.key = key
    server.cleanups[:0] = cleanups
    _wait_ready(server)
    return server


def create_database(admin_url: str) -> tuple[str, Callable[[], None]]:
    """A fresh database on the PostgreSQL of `admin_url`; its URL and a function dropping it."""
    from sqlalchemy import create_engine, text

    name = f"neurules_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as c:
            c.execute(text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"))
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()

    return admin_url.rsplit("/", 1)[0] + f"/{name}", drop


def delete_redis_key(url: str, key: str) -> None:
    """Remove the benchmark's queue from the Redis (nothing else)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        client.delete(key)
    finally:
        client.close()


@contextlib.contextmanager
def running(start: Callable[[], Server]) -> Iterator[Server]:
    """A server for the duration of a `with` block."""
    server = start()
    try:
        yield server
    finally:
        server.stop()
