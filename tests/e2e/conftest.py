"""Real processes for end-to-end tests: uvicorn / `neurules-admin serve`, a `celery worker`, Redis, PostgreSQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from tests.e2e.console_kit import Console, Tab

from tests.conftest import ROOT, fresh_pg_database, pg_available, redis_available, skip_unless_ci

BIN = Path(sys.executable).parent
# the `neurules-admin` console script's code (`worker.cli:main`), run from this checkout whatever the
# installed script points at
ADMIN = [sys.executable, "-m", "worker.cli"]


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without any NEURULES_* variable, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURULES_")}
    env.update(extra)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


class Proc:
    """A child process with its output in a log file; stopped gracefully, killed if it lingers."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path, log: Path) -> None:
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115
        self.p = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )

    def tail(self, n: int = 4000) -> str:
        """Last bytes of the log."""
        return self.log_path.read_bytes()[-n:].decode(errors="replace")

    def stop(self) -> None:
        """SIGTERM the process group, then SIGKILL after 15 s."""
        t0 = time.monotonic()
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait(5)
        self._log.close()
        print(f"stopped {self.log_path.name} in {time.monotonic() - t0:.1f}s")


def wait_ready(url: str, proc: Proc, timeout: float = 60) -> None:
    """Poll /readyz until 200 (fail with the server log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.p.poll() is not None:
            pytest.fail(f"server exited early:\n{proc.tail()}")
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"server not ready after {timeout}s:\n{proc.tail()}")


def admin(args: list[str], env: dict[str, str], cwd: Path) -> str:
    """Run `neurules-admin ...` and return its stdout."""
    out = subprocess.run([*ADMIN, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@dataclass
class Service:
    """A running service and an API key for it."""

    url: str
    key: str
    procs: list[Proc]
    env: dict[str, str] | None = None
    tmp: Path | None = None

    def spawn_worker(self, name: str) -> Proc:
        """Start one more `celery worker` process on the service's queue."""
        assert self.env is not None and self.tmp is not None
        p = Proc(
            [
                str(BIN / "celery"),
                "-A",
                "worker.celery_app",
                "worker",
                "-P",
                "solo",
                "-Q",
                self.env["NEURULES_QUEUE"],
                "--without-mingle",
                "--without-gossip",
                "-l",
                "INFO",
                "-n",
                f"{name}@%h",
            ],
            self.env,
            ROOT,
            self.tmp / f"{name}.log",
        )
        self.procs.append(p)
        return p

    def logs(self) -> str:
        """Tails of every process log."""
        return "\n\n".join(f"--- {p.log_path.name}\n{p.tail()}" for p in self.procs)


@pytest.fixture(scope="module")
def distributed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """uvicorn + a separate `celery worker` process on PostgreSQL + Redis (fresh database and queue)."""
    yield from distributed_service(tmp_path_factory)


def distributed_service(tmp_path_factory: pytest.TempPathFactory, **settings: str) -> Iterator[Service]:
    """The `distributed` service, with further NEURULES_* settings (`evaluation_sync_max_rows="0"`)."""
    if not (pg_available() and redis_available()):
        skip_unless_ci("PostgreSQL and Redis are needed (scripts/services.sh starts them)")
    tmp = tmp_path_factory.mktemp("distributed")
    db_url, drop = fresh_pg_database()
    env = clean_env(
        **{f"NEURULES_{k.upper()}": v for k, v in settings.items()},
        NEURULES_MODE="distributed",
        NEURULES_DATABASE_URL=db_url,
        NEURULES_BROKER_URL="redis://127.0.0.1:6379/0",
        NEURULES_QUEUE=f"nr-test-{uuid.uuid4().hex[:8]}",
        NEURULES_DATA_DIR=str(tmp / "var"),
        NEURULES_PROGRESS_EVERY_EPOCHS="2",
        NEURULES_HEARTBEAT_INTERVAL_S="1",
        NEURULES_STALE_AFTER_S="6",
        NEURULES_REAPER_INTERVAL_S="1",
    )
    admin(["migrate"], env, tmp)
    admin(["create-tenant", "e2e"], env, tmp)
    key = admin(["create-key", "e2e"], env, tmp)
    port = free_port()
    api = Proc(
        [
            str(BIN / "uvicorn"),
            "worker.service:app",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--loop",
            "uvloop",
            "--http",
            "httptools",
            "--no-access-log",
        ],
        env,
        ROOT,
        tmp / "uvicorn.log",
    )
    svc = Service(f"http://127.0.0.1:{port}", key, [api], env, tmp)
    svc.spawn_worker(f"e2e-{port}")
    try:
        wait_ready(svc.url, api)
        yield svc
    finally:
        for p in svc.procs:
            p.stop()
        drop()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """The service exactly as `make run` starts it: `neurules-admin serve`, no environment, fresh ./var."""
    yield from serve_embedded(tmp_path_factory.mktemp("embedded"), clean_env())


def serve_embedded(tmp: Path, env: dict[str, str]) -> Iterator[Service]:
    """`neurules-admin serve` in `tmp` with `env`, a tenant and its key: the service until the generator closes."""
    port = free_port()
    admin(["create-tenant", "e2e"], env, tmp)
    key = admin(["create-key", "e2e"], env, tmp)
    proc = Proc([*ADMIN, "serve", "--port", str(port)], env, tmp, tmp / "serve.log")
    svc = Service(f"http://127.0.0.1:{port}", key, [proc])
    try:
        wait_ready(svc.url, proc)
        yield svc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def embedded_two_processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`neurules-admin serve --workers 2`: two server processes sharing the port via SO_REUSEPORT."""
    tmp = tmp_path_factory.mktemp("embedded2")
    env = clean_env()
    port = free_port()
    admin(["create-tenant", "e2e"], env, tmp)
    key = admin(["create-key", "e2e"], env, tmp)
    proc = Proc([*ADMIN, "serve", "--port", str(port), "--workers", "2"], env, tmp, tmp / "serve2.log")
    svc = Service(f"http://127.0.0.1:{port}", key, [proc], env, tmp)
    try:
        wait_ready(svc.url, proc)
        yield svc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for a browser test module (which defines the `console` fixture)."""
    from tests.e2e.console_kit import launch_browser  # console_kit imports this module

    with launch_browser() as b:
        yield b


@pytest.fixture
def tab(browser: Any, console: Console) -> Iterator[Tab]:
    """A fresh browser context on the module's console, checked when the test ends."""
    from tests.e2e.console_kit import open_tab

    with open_tab(browser, console) as t:
        yield t
