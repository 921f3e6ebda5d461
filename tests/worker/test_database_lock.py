"""One embedded worker per SQLite database (`worker.database_lock`): the lock, its holder, a killed holder, and
the embedded worker requeueing at start only where the lock proves it alone (real processes in
tests/e2e/test_two_embedded_services.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.services import jobs as jobsvc
from app.settings import Settings
from tests.conftest import ROOT
from tests.worker.test_job_runner import job_row, make_job
from worker.database_lock import DatabaseInUse, acquire, lock_path, release

HOLD = """
import sys, time
from app.settings import Settings
from worker import database_lock
try:
    database_lock.acquire(Settings(data_dir=sys.argv[1]))
except database_lock.DatabaseInUse as e:
    print(f"in use: {e}", flush=True)
    sys.exit(7)
print("held", flush=True)
time.sleep(60)
"""


def holder(data_dir: Path) -> tuple[subprocess.Popen[str], str]:
    """Another process taking the data directory's database lock, and what it said: `held`, or (exit status 7)
    why it was refused."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(data_dir)], env=env, stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    assert p.stdout is not None
    said = p.stdout.readline().strip()
    if said != "held":
        p.wait(10)
        p.stdout.close()
    return p, said


def stop(p: subprocess.Popen[str]) -> None:
    """SIGKILL a holder (the kernel drops its lock) and reap it."""
    p.kill()
    p.wait()
    if p.stdout is not None:
        p.stdout.close()


@pytest.fixture
def released(tmp_path: Path) -> Iterator[Settings]:
    """Settings on a fresh data directory; whatever lock this process took on it is given back afterwards."""
    settings = Settings(data_dir=tmp_path / "var")
    yield settings
    path = lock_path(settings)
    assert path is not None
    release(path)


def test_the_lock_lies_beside_the_sqlite_file_and_only_there(tmp_path: Path) -> None:
    data = tmp_path / "var"
    assert lock_path(Settings(data_dir=data)) == Path(os.path.realpath(data / "neurules.sqlite3.lock"))
    other = tmp_path / "elsewhere" / "db.sqlite3"
    assert lock_path(Settings(data_dir=data, database_url=f"sqlite:///{other}")) == Path(
        os.path.realpath(f"{other}.lock")
    )
    assert lock_path(Settings(database_url="sqlite://")) is None  # in memory: no other process can open it
    assert lock_path(Settings(database_url="sqlite:///:memory:")) is None
    assert lock_path(Settings(database_url="postgresql+psycopg://u@h/db")) is None  # not this host's to lock


def test_a_second_process_is_refused_with_the_path_and_the_holder(released: Settings) -> None:
    path = acquire(released)
    assert path is not None and acquire(released) == path  # again in the same process: fine
    assert path.read_text() == f"{os.getpid()}\n"
    other, said = holder(released.data_dir)
    assert other.returncode == 7 and said.startswith("in use: ")
    assert str(path) in said and f"held by pid {os.getpid()}" in said, said
    release(path)
    again, said = holder(released.data_dir)  # given back: the next one takes it
    stop(again)
    assert said == "held"


def test_a_killed_holder_leaves_no_stale_lock(released: Settings) -> None:
    other, said = holder(released.data_dir)
    try:
        assert said == "held"
        with pytest.raises(DatabaseInUse) as refused:
            acquire(released)
        assert refused.value.holder == other.pid and f"held by pid {other.pid}" in str(refused.value)
    finally:
        stop(other)  # SIGKILL: no chance to clean anything up
    path = lock_path(released)
    assert path is not None and path.read_text() == f"{other.pid}\n"  # the dead holder's pid is still written...
    assert acquire(released) == path  # ... and decides nothing: the kernel dropped its lock


def test_build_service_refuses_a_database_another_embedded_worker_holds(tmp_path: Path) -> None:
    from worker.service import build_service

    other, said = holder(tmp_path / "var")
    try:
        assert said == "held"
        with pytest.raises(DatabaseInUse):
            build_service(Settings(data_dir=tmp_path / "var"), configure_logs=False)
        api_only = build_service(Settings(data_dir=tmp_path / "var", embedded_worker=False), configure_logs=False)
        api_only.state.service.db.dispose()  # an API without an embedded worker needs no lock
    finally:
        stop(other)


@pytest.mark.parametrize("sole_worker", [True, False])
def test_the_embedded_worker_requeues_at_start_only_when_it_is_the_only_one(
    sqlite_api, monkeypatch: pytest.MonkeyPatch, sole_worker: bool
) -> None:
    """Holding the lock, every running job under `embedded@<host>/` is an orphan of its previous incarnation;
    without it (a server database) such a job may be another live embedded worker's: left to the reaper."""
    from worker import runtime
    from worker.embedded import EMBEDDED_HOST

    jid = make_job(sqlite_api)
    st = sqlite_api.app.state.service
    with st.db.session() as s:
        assert jobsvc.claim(s, jid, f"{EMBEDDED_HOST}/999/abc")
    started: list[object] = []
    monkeypatch.setattr(runtime, "start_embedded_worker", lambda app, settings: started.append(app))
    runtime.EmbeddedWorker(st.db, st.settings, None, sole_worker=sole_worker).start()  # type: ignore[arg-type]
    assert started == [None]
    assert job_row(sqlite_api, jid).state == ("queued" if sole_worker else "running")


def test_a_symlink_to_the_database_shares_its_lock(tmp_path: Path) -> None:
    real = tmp_path / "data" / "neurules.sqlite3"
    real.parent.mkdir()
    real.touch()
    link = tmp_path / "link.sqlite3"
    link.symlink_to(real)
    by_link = lock_path(Settings(data_dir=tmp_path, database_url=f"sqlite:///{link}"))
    assert by_link == lock_path(Settings(data_dir=tmp_path, database_url=f"sqlite:///{real}"))


HANDED = """
import sys, time
from worker import database_lock
def child(token):
    import os
    fd = database_lock._held[token]
    print("child holds" if not os.get_inheritable(fd) else "child holds an inheritable descriptor", flush=True)
    time.sleep(float(sys.argv[2]))
if __name__ == "__main__":
    import multiprocessing
    from pathlib import Path
    from app.settings import Settings
    path = database_lock.acquire(Settings(data_dir=sys.argv[1]))
    p = multiprocessing.get_context("spawn").Process(target=child, args=(database_lock.handoff(path),))
    p.start()
    time.sleep(1.5)
    database_lock.release(path)
    print("parent released", flush=True)
    p.join()
"""


def test_a_lock_handed_to_a_spawned_process_stays_held_while_either_lives(tmp_path: Path) -> None:
    """`serve --workers N` hands the lock to process 0 as it starts (no moment where it is free)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = tmp_path / "handed.py"
    script.write_text(HANDED)
    p = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), "4"], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline().strip() for _ in range(2)]
        assert lines == ["child holds", "parent released"], lines
        with pytest.raises(DatabaseInUse) as refused:  # the child still holds it, and names itself
            acquire(Settings(data_dir=tmp_path))
        assert refused.value.holder not in (None, p.pid) and not refused.value.sibling
        assert p.wait(timeout=30) == 0
        path = acquire(Settings(data_dir=tmp_path))  # both gone: free again
        assert path is not None
        release(path)
    finally:
        p.kill()


SECOND = """
import sys
from app.settings import Settings
from worker import database_lock
try:
    database_lock.acquire(Settings(data_dir=sys.argv[1]))
except database_lock.DatabaseInUse as e:
    print(f"sibling={e.sibling}", flush=True)
"""


def test_two_services_started_by_one_shell_are_not_siblings(tmp_path: Path) -> None:
    """Only processes of one multiprocessing parent (uvicorn --workers) share a service; two programs started by
    one script or process manager (the same parent pid) are two services, and the second must refuse."""
    first, said = holder(tmp_path)
    try:
        assert said == "held", said
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        # a shell parent for both: the test process is the parent of `first`; make the second its sibling too
        out = subprocess.run(
            [sys.executable, "-c", SECOND, str(tmp_path)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert out.stdout.strip() == "sibling=False", (out.stdout, out.stderr)
    finally:
        first.kill()


def test_a_data_folder_that_cannot_be_written_is_one_line_not_a_traceback(
    released: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve` on a read-only file system ended in a traceback (OSError: [Errno 30] ... neurules.sqlite3.lock): it
    exits with one line naming the file and what to do."""
    import errno

    from worker import database_lock, serve

    path = lock_path(released)

    def read_only(*_: object, **__: object) -> int:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(database_lock.os, "open", read_only)
    with pytest.raises(SystemExit) as ended:
        serve._lock_database(released)
    message = str(ended.value.code)
    assert message == (
        f"neurules-admin: cannot take the database's lock ({path}: Read-only file system); "
        "the folder of the database must be writable"
    ), message
