"""`neurules-admin backup` / `restore` of the embedded database: what they refuse, changing nothing (the whole
round trip against a running server: tests/e2e/test_backup_restore_e2e.py)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.db import sqlite_path
from tests.conftest import Api
from worker.cli import main


def _files(folder: Path) -> list[str]:
    """The folder's files but the lock file (which the service makes anyway)."""
    return sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.endswith(".lock"))


def test_a_file_that_is_no_database_is_refused_and_nothing_changes(
    sqlite_api: Api, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    live = Path(sqlite_path(sqlite_api.url) or "")
    monkeypatch.setenv("NEURULES_DATABASE_URL", sqlite_api.url)
    before = _files(live.parent)
    (tmp_path / "in").mkdir()
    junk = tmp_path / "in" / "junk.sqlite3"
    junk.write_bytes(b"not a database" * 100)
    empty = tmp_path / "in" / "empty.sqlite3"
    sqlite3.connect(empty).execute("CREATE TABLE t (a)").connection.close()
    cases = [(junk, "cannot be read as a database"), (empty, "no NeuRules schema"), (tmp_path / "in" / "no", "missing")]
    for bad, words in cases:
        with pytest.raises(SystemExit, match=words):
            main(["restore", str(bad)])
    assert _files(live.parent) == before
    monkeypatch.setenv("NEURULES_DATABASE_URL", "postgresql+psycopg://u@127.0.0.1:1/db")
    with pytest.raises(SystemExit, match="pg_dump"):
        main(["backup", str(tmp_path / "x")])


def test_a_restore_under_a_process_that_has_the_database_open_changes_nothing(
    sqlite_api: Api, doc: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server without an embedded worker holds no lock; its open connections make the restore refuse."""
    live = Path(sqlite_path(sqlite_api.url) or "")
    sqlite_api.import_model(doc)  # the test's service keeps the file open
    monkeypatch.setenv("NEURULES_DATABASE_URL", sqlite_api.url)
    (tmp_path / "backups").mkdir()
    main(["backup", str(tmp_path / "backups" / "b.sqlite3")])
    capsys.readouterr()
    before = _files(live.parent)
    with pytest.raises(SystemExit, match="open in another process"):
        main(["restore", str(tmp_path / "backups" / "b.sqlite3")])
    assert _files(live.parent) == before and sqlite_api.count("model_versions") == 1


def test_restores_keep_every_replaced_database_and_read_a_backups_log(
    sqlite_api: Api, doc: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A review: two restores within one second renamed the second replaced database over the first (its 29,080
    rows lost), and a backup file in WAL mode with a `-wal` beside it was restored without the log's commits."""
    live = Path(sqlite_path(sqlite_api.url) or "")
    sqlite_api.import_model(doc)
    monkeypatch.setenv("NEURULES_DATABASE_URL", sqlite_api.url)
    (tmp_path / "b").mkdir()
    main(["backup", str(tmp_path / "b" / "one.sqlite3")])
    capsys.readouterr()
    with pytest.raises(SystemExit, match="would be taken for one of"):
        main(["backup", f"{live}-journal"])
    sqlite_api.app.state.service.db.engine.dispose()
    with _holding_open_only(tmp_path / "b" / "one.sqlite3") as walled:  # the backup in WAL mode, a commit in its log
        walled.execute("PRAGMA journal_mode=WAL")
        walled.execute("CREATE TABLE only_in_the_log (a INTEGER)")
        walled.commit()
        assert Path(f"{tmp_path / 'b' / 'one.sqlite3'}-wal").stat().st_size > 0
        kept = []
        for _ in range(2):
            main(["restore", str(tmp_path / "b" / "one.sqlite3")])
            kept.append(json.loads(capsys.readouterr().out)["replaced_kept_as"])
    assert len(set(kept)) == 2 and all(Path(k).exists() for k in kept)
    with sqlite3.connect(live) as conn:
        assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'only_in_the_log'").fetchone()[0] == 1


@contextlib.contextmanager
def _holding_open_only(path: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(path)
    try:
        yield conn
    finally:
        conn.close()
