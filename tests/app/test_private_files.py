"""The embedded database's files are readable by the service's user only (they hold every tenant's data)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from sqlalchemy import text

from app.db import make_engine


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_sqlite_database_its_log_and_folder_are_private(tmp_path: Path) -> None:
    """Created with the process's umask (0644 under 0022): any local user could read the datasets, the audit
    trail and the key hashes. Now the folder is 0700 and the file, its WAL and shm 0600."""
    folder = tmp_path / "data"
    engine = make_engine(f"sqlite:///{folder}/neurules.sqlite3")
    with engine.begin() as c:
        c.execute(text("CREATE TABLE t (a INTEGER)"))
        c.execute(text("INSERT INTO t VALUES (1)"))
    with engine.connect() as c:  # the WAL and shm exist while a connection is open
        assert c.execute(text("SELECT a FROM t")).scalar() == 1
        files = sorted(p.name for p in folder.iterdir())
        assert files == ["neurules.sqlite3", "neurules.sqlite3-shm", "neurules.sqlite3-wal"]
        assert {name: _mode(folder / name) for name in files} == dict.fromkeys(files, 0o600)
    assert _mode(folder) == 0o700
    engine.dispose()


def test_an_existing_database_keeps_the_mode_its_operator_gave_it(tmp_path: Path) -> None:
    """A file shared on purpose with a backup user's group stays as it was."""
    path = tmp_path / "db.sqlite3"
    path.touch(mode=0o640)
    path.chmod(0o640)
    engine = make_engine(f"sqlite:///{path}")
    with engine.begin() as c:
        c.execute(text("CREATE TABLE t (a INTEGER)"))
    assert _mode(path) == 0o640
    engine.dispose()


def test_a_uri_address_creates_no_file(tmp_path: Path, monkeypatch: Any) -> None:
    """A review: `sqlite:///file:memdb1?mode=memory&uri=true` left an empty file named `file:memdb1` behind."""
    monkeypatch.chdir(tmp_path)
    engine = make_engine("sqlite:///file:memdb1?mode=memory&uri=true")
    with engine.connect() as c:
        assert c.execute(text("SELECT 1")).scalar() == 1
    engine.dispose()
    assert list(tmp_path.iterdir()) == []


def test_a_file_url_with_driver_options_is_still_a_plain_file(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """A review: `sqlite:////path/db.sqlite3?timeout=10` was taken for a URI: created 0644, and the admin commands
    read it as a server database (a TypeError on `connect_timeout`)."""
    from worker.cli import main

    url = f"sqlite:///{tmp_path / 'data' / 'db.sqlite3'}?timeout=10"
    monkeypatch.setenv("NEURULES_DATABASE_URL", url)
    main(["create-tenant", "acme"])
    main(["list-tenants"])
    assert '"name": "acme"' in capsys.readouterr().out
    assert _mode(tmp_path / "data" / "db.sqlite3") == 0o600 and _mode(tmp_path / "data") == 0o700


def test_the_lock_file_and_the_broker_folders_are_private_too(tmp_path: Path) -> None:
    """A crash probe: beside the private database, its `.lock` was made 0644 and the broker's folders 0755."""
    from app.settings import Settings
    from worker.celery_app import make_celery
    from worker.database_lock import acquire, release

    settings = Settings(data_dir=tmp_path / "var")
    make_celery(settings)
    broker = settings.broker_dir
    assert {p.name: _mode(p) for p in [broker, *broker.iterdir()]} == {
        "broker": 0o700,
        "queue": 0o700,
        "processed": 0o700,
        "control": 0o700,
    }
    lock = acquire(settings)
    assert lock is not None
    try:
        assert _mode(lock) == 0o600
    finally:
        release(lock)
