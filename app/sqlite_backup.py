"""Backup and restore of the embedded SQLite database, the two ways that keep it whole.

The database runs in WAL mode: the newest commits live in `<file>-wal` until a checkpoint copies them into the
file. A `cp` of the file alone while the service runs misses them (an operator probe: 0 of 270 audit rows), and
verifies as intact (the chain's head is in the same file, a consistent stale snapshot). A restore by `mv` leaves
the old `-wal` and `-shm` beside the restored file, and SQLite replays those frames onto it at the next open: a
corrupt file, a chain that reads as truncated, or the restore silently undone.

`backup` uses SQLite's online backup (one read transaction: a consistent copy of every commit made before it,
the WAL's included, while the service goes on writing) into a self-contained file (rollback journal, no `-wal`),
checks it and names each tenant's chain head, to be recorded outside the database. `restore` runs only while no
embedded worker holds the database, checks the backup first, keeps the database it replaces (checkpointed into
one file, renamed aside), and removes the old `-wal` / `-shm` before the backup takes the file's place.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

SIDE_FILES = ("-wal", "-shm")  # SQLite's write-ahead log and its index, beside the database file


class BackupError(Exception):
    """A backup or restore that was refused or failed; nothing was changed (the message says why)."""


@dataclass(frozen=True)
class ChainHead:
    """The last link of one tenant's audit chain in a database file."""

    tenant_id: str
    seq: int
    row_hash: str


@dataclass(frozen=True)
class Checked:
    """What a database file holds: its schema revision and each tenant's audit chain head."""

    path: Path
    size_bytes: int
    schema: str
    heads: list[ChainHead]


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to a database file (it creates nothing, and changes no journal mode)."""
    conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    try:
        yield conn
    finally:
        conn.close()


def check(path: Path) -> Checked:
    """BackupError unless `path` is a whole NeuRules database (SQLite's integrity check, a migrated schema)."""
    if not path.is_file() or path.stat().st_size == 0:
        raise BackupError(f"{path} is not a database file (missing or empty)")
    try:
        with _read_only(path) as conn:
            problems = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
            if problems != ["ok"]:
                raise BackupError(f"{path} fails SQLite's integrity check: {'; '.join(problems[:3])}")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not {"alembic_version", "audit_chain_heads"} <= tables:
                raise BackupError(f"{path} holds no NeuRules schema (never migrated)")
            schema = str(conn.execute("SELECT version_num FROM alembic_version").fetchone()[0])
            rows = conn.execute("SELECT tenant_id, seq, row_hash FROM audit_chain_heads ORDER BY tenant_id")
            heads = [ChainHead(str(t), int(s), str(h)) for t, s, h in rows]
    except sqlite3.DatabaseError as e:
        raise BackupError(f"{path} cannot be read as a database ({e})") from None
    return Checked(path, path.stat().st_size, schema, heads)


def backup(source: Path, dest: Path) -> Checked:
    """Copy the live database `source` into the new file `dest` (0600) with SQLite's online backup; checked."""
    if dest.exists():
        raise BackupError(f"{dest} exists already: name a new file (a backup never overwrites one)")
    if dest.parent.resolve() == source.parent.resolve() and dest.name.startswith(source.name):
        # `<db>-journal` beside the live file is its rollback journal to SQLite: every connection then sees it "hot"
        raise BackupError(f"{dest} would be taken for one of {source.name}'s own files: name another file")
    check(source)
    partial = dest.with_name(f".{dest.name}.partial")
    try:
        _copy(source, partial)
        os.replace(partial, dest)
        _fsync(dest.parent)
    except (OSError, sqlite3.Error) as e:
        partial.unlink(missing_ok=True)
        raise BackupError(f"backup to {dest} failed: {e}") from None
    return check(dest)


def _copy(source: Path, dest: Path) -> None:
    """`source` as SQLite reads it (its `-wal` included, in one read transaction) into the new file `dest` (0600),
    self-contained: a rollback journal, no `-wal` (the service turns WAL on again when it opens it)."""
    os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))
    with _read_only(source) as src, contextlib.closing(sqlite3.connect(dest)) as out:
        src.backup(out)  # one step: a consistent snapshot
        out.execute("PRAGMA journal_mode=DELETE")
    _fsync(dest)


def restore(backup_file: Path, target: Path) -> tuple[Checked, Path | None]:
    """Put a checked backup in the place of the database `target` (no service may have it open: the caller holds
    its lock). The database replaced is kept whole beside it (`<file>.replaced-<UTC time>`); its path, or None."""
    checked = check(backup_file)
    incoming = target.with_name(f".{target.name}.restoring")
    try:
        _copy(backup_file, incoming)  # not the file's bytes alone: a backup kept in WAL mode has commits in its -wal
        kept = _set_aside(target)
    except (OSError, sqlite3.Error, BackupError) as e:
        incoming.unlink(missing_ok=True)
        if isinstance(e, BackupError):
            raise
        raise BackupError(f"restore into {target} failed: {e}") from None
    for suffix in SIDE_FILES:  # the old log must not be replayed onto the restored file
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    os.replace(incoming, target)
    _fsync(target.parent)
    return checked, kept


def _set_aside(target: Path) -> Path | None:
    """Checkpoint the current database into its file and rename it aside; None when there is none."""
    if not target.exists():
        return None
    conn = sqlite3.connect(target, timeout=1)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # its log merged: the file alone is the whole database. Leaving WAL needs the only connection: another
        # process that has it open (a server without an embedded worker holds no lock) makes this refuse
        mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
    except sqlite3.OperationalError as e:
        raise BackupError(f"{target} is open in another process ({e}): stop every service on it first") from None
    finally:
        conn.close()
    if str(mode).lower() != "delete":
        raise BackupError(f"{target} is open in another process (it stays in {mode} mode): stop every service on it")
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}"
    for n in range(100):  # never over an earlier kept database (two restores within one clock tick)
        kept = target.with_name(f"{target.name}.replaced-{stamp}" + (f"-{n}" if n else ""))
        try:
            os.link(target, kept)  # fails if the name is taken; then the old name goes
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links
            if kept.exists():
                continue
            os.replace(target, kept)
            return kept
        target.unlink()
        return kept
    raise BackupError(f"no free name to keep {target} under: move the older .replaced- files away")


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["BackupError", "ChainHead", "Checked", "backup", "check", "restore"]
