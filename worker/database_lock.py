"""One embedded training worker per SQLite database: an exclusive lock held for the process's lifetime.

The embedded worker holds its jobs under `embedded@<host>/...` and, when it starts, requeues every running job
under that prefix as an orphan of its previous incarnation (`worker.runtime.EmbeddedWorker`). That is right only
while no other embedded worker on this host uses the same database: a second service started on the same data
(`make run` twice, a systemd unit and a manual start) would take the first one's running jobs and train them
again beside it. So the process that runs the embedded worker first takes an exclusive `flock` on
`<database file>.lock`, beside the SQLite file, and keeps it until it exits. The kernel drops the lock when the
process ends however it ends (SIGKILL, a crash, a power cut), so no stale lock blocks the next start; the file's
content (the holder's pid) only names the holder in the message, it decides nothing.

A server database (PostgreSQL) cannot be locked from this host's file system: there the embedded worker does not
requeue at start and its orphans are requeued by the reaper once their heartbeats are stale, like any worker's.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy.engine import make_url

from app.settings import Settings


class DatabaseInUse(RuntimeError):
    """Another process runs an embedded worker on this SQLite database."""

    def __init__(self, path: Path, holder: int | None) -> None:
        self.path, self.holder = path, holder
        # a sibling: both started by one multiprocessing parent (uvicorn --workers), not merely by one shell
        self.sibling = (
            holder is not None
            and multiprocessing.parent_process() is not None
            and os.getppid() > 1
            and _parent_of(holder) == os.getppid()
        )
        who = f"pid {holder}" if holder is not None else "another process (pid not known yet)"
        super().__init__(
            f"another NeuRules service with an embedded worker is running on the database "
            f"{path.with_suffix('')}: its lock {path} is held by {who}. Stop that service first, or give this "
            f"one its own NEURULES_DATA_DIR (one embedded worker per database; NEURULES_EMBEDDED_WORKER=false "
            f"serves the API without one)"
        )


_held: dict[Path, int] = {}  # lock file -> the descriptor holding it, in this process
_guard = threading.Lock()


def lock_path(settings: Settings) -> Path | None:
    """The lock file of the settings' SQLite database file (`<file>.lock`); None for an in-memory or server database."""
    if not settings.is_sqlite:
        return None
    url = make_url(settings.resolved_database_url)
    name = url.database
    if not name or name == ":memory:" or url.query.get("mode") == "memory":
        return None
    return Path(os.path.realpath(name) + ".lock")  # the file itself: a symlink to it shares its lock


def acquire(settings: Settings) -> Path | None:
    """Take the database's lock for the rest of this process's life (again in the same process: a no-op);
    the lock file, or None where there is nothing to lock (see `lock_path`). DatabaseInUse when another
    process holds it."""
    path = lock_path(settings)
    if path is None:
        return None
    with _guard:
        if path in _held:
            return path
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)  # beside the database: private like it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder_pid(fd)
            os.close(fd)
            raise DatabaseInUse(path, holder) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            _write_pid(fd)
        except OSError:  # a lock that names no one: give it back rather than hold it unrecorded
            os.close(fd)
            raise
        _held[path] = fd
        return path


def release(path: Path) -> None:
    """Give a lock this process holds back (the kernel does it anyway when the process ends)."""
    with _guard:
        fd = _held.pop(path, None)
    if fd is not None:
        os.close(fd)  # closing the only descriptor of the open file releases the flock


def handoff(path: Path) -> Any:
    """What to pass to a process started by multiprocessing (spawn) so that it holds this process's lock too: the
    same open file, so the lock stays held while either lives, with no moment where another service could take
    it. Unpickled in the child, it registers the lock as held there (`acquire` then returns at once)."""
    return _Handoff(path, _held[path])


class _Handoff:
    def __init__(self, path: Path, fd: int) -> None:
        self.path, self.fd = path, fd

    def __reduce__(self) -> tuple[Any, ...]:
        from multiprocessing import reduction

        return (_adopt, (self.path, reduction.DupFd(self.fd)))  # the descriptor passed to the child as it starts


def _adopt(path: Path, dup: Any) -> Path:
    fd = dup.detach()
    os.set_inheritable(fd, False)  # passed as inheritable: a program this process starts must not keep the lock
    with _guard:
        if _held.setdefault(path, fd) == fd:  # the embedded worker's process: the one a second start names
            _write_pid(fd)
    return path


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _parent_of(pid: int) -> int | None:
    """The parent's pid of a process (Linux /proc), None when unknown."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _holder_pid(fd: int) -> int | None:
    """The holder's pid, waiting up to 1 s for a holder that has just taken the lock to write it."""
    for _ in range(20):
        pid = _read_pid(fd)
        if pid is not None:
            return pid
        time.sleep(0.05)
    return None


def _read_pid(fd: int) -> int | None:
    """The holder's pid as it wrote it (None while it has not yet, or when the file is not ours)."""
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError):
        return None
