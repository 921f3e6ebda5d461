"""Processes the fault scenarios stop and start: a private PostgreSQL and Redis on free ports, the API, workers.

Never the shared instances on 5432 / 6379: PostgreSQL is a fresh cluster (initdb) in a temporary folder,
Redis a fresh `redis-server` without persistence. initdb and pg_ctl refuse to run as root: as root they
run as the `postgres` user (`runuser`), in a folder that user owns.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def free_port() -> int:
    """An unused TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, *, up: bool, timeout: float = 30.0) -> None:
    """Wait until something listens on `port` (or nothing does)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if up:
                    return
        except OSError:
            if not up:
                return
        time.sleep(0.05)
    raise TimeoutError(f"port {port} still {'down' if up else 'up'} after {timeout}s")


class Proc:
    """A child process in its own session, output to a log file."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path, cwd: Path = ROOT) -> None:
        self.args, self.env, self.log_path, self.cwd = args, env, log, cwd
        self.p: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """(Re)start the process, appending to its log."""
        with open(self.log_path, "ab") as log:
            self.p = subprocess.Popen(
                self.args, env=self.env, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )

    def alive(self) -> bool:
        """Whether it runs."""
        return self.p is not None and self.p.poll() is None

    def kill(self, sig: int = signal.SIGKILL, *, wait: bool = True) -> None:
        """Send `sig` to its whole process group (and wait for it to end)."""
        if self.p is not None and self.p.poll() is None:
            os.killpg(self.p.pid, sig)
            if wait:
                self.p.wait(20)

    def stop(self) -> None:
        """SIGTERM (and SIGCONT, should it be paused), then SIGKILL after 20 s."""
        try:
            self.kill(signal.SIGTERM, wait=False)
            self.kill(signal.SIGCONT)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)

    def tail(self, n: int = 3000) -> str:
        """The end of its log."""
        return self.log_path.read_bytes()[-n:].decode(errors="replace") if self.log_path.exists() else ""


def pg_bin(name: str) -> str:
    """Path of a PostgreSQL server program (the newest installed version, else PATH)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    path = found[-1] if found else shutil.which(name)
    if not path:
        raise FileNotFoundError(f"{name} not found (install the PostgreSQL server package)")
    return path


class PgServer:
    """A private PostgreSQL cluster on a free port, in its own temporary folder; `stop()` and `start()` it at will.

    The folder is made directly under the system's temporary directory: as root the cluster runs as
    `postgres`, who must be able to reach it (a pytest `tmp_path` is private to root).
    """

    def __init__(self) -> None:
        self.folder, self.port = Path(tempfile.mkdtemp(prefix="neurules-pg-")), free_port()
        self.data = self.folder / "pgdata"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            shutil.chown(self.folder, "postgres")
        self._run(pg_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        cmd = ["runuser", "-u", "postgres", "--", *args] if self._as_postgres else list(args)
        out = subprocess.run(cmd, capture_output=True, cwd=self.folder, timeout=120, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}): {out.stderr[-2000:]}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        opts = f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-o", opts, "-l", str(self.folder / "pg.log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (`fast`: disconnect every client and shut down cleanly; `immediate`: like a crash)."""
        self._run(pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
        wait_port(self.port, up=False)

    def destroy(self) -> None:
        """Stop it if running and remove its files."""
        with contextlib.suppress(RuntimeError, TimeoutError):
            self.stop("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)


class RedisServer:
    """A private redis-server without persistence on a free port: killing it loses every message, like a crash."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = Proc([*args, "--dir", str(folder)], dict(os.environ), folder / "redis.log", cwd=folder)
        wait_port(self.port, up=True)

    def kill(self) -> None:
        """SIGKILL: the queue's messages are gone."""
        self.proc.kill(signal.SIGKILL)
        wait_port(self.port, up=False)

    def start(self) -> None:
        """Start it again, empty, on the same port."""
        self.proc.start()
        wait_port(self.port, up=True)

    def destroy(self) -> None:
        """Stop it."""
        self.proc.kill(signal.SIGKILL)
