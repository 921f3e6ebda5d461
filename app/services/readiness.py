"""Readiness: each dependency checked on its own; ready when every configured one answers.

A check's result is `ok`, `not configured`, `warning: ...` (reported, does not make the service
unready) or `error: ...` (makes it unready).
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from sqlalchemy import text

from app.db import READ_ONLY_CAUSE, Database, schema_revision, sqlite_file
from app.services import workers

log = logging.getLogger("neurules.readiness")

Check = Callable[[], None]  # raises when what it checks is not ready
OK = "ok"
NOT_CONFIGURED = "not configured"
WARNING = "warning: "


class SchemaNotCurrent(Exception):
    """The database answers, but its schema is older than this code needs (or was never migrated)."""


@dataclass(frozen=True)
class ExpectedSchema:
    """The migration this code needs (`head`) and the revisions before it (a database at one is behind).

    A database at a revision this code does not know is newer (a rolling upgrade migrated it first): that
    is ready, since migrations only add what older code ignores.
    """

    head: str
    older: frozenset[str]

    def problem(self, found: str | None) -> str | None:
        """Why a database at revision `found` cannot serve this code (None: it can)."""
        if found is None:
            return "the schema is not migrated"
        if found in self.older:
            return f"the schema is at revision {found}, older than the {self.head} this service needs"
        return None


class DiskFull(Exception):
    """The disk holding the SQLite database has (almost) no space left: every write fails."""


class ReadOnly(Exception):
    """The database answers but refuses writes (PostgreSQL: a standby, or `default_transaction_read_only`)."""


class FolderUnwritable(Exception):
    """The folder of the SQLite database refuses a new file (read-only, failing, full): writes fail there too."""


MIN_FREE_BYTES = 1024 * 1024  # below this a write (a WAL frame, a page) may not fit
PROBE_PREFIX = ".neurules-ready-"  # a file of this name is written and removed beside the database by each check


def check_database(db: Database, schema: ExpectedSchema | None = None) -> None:
    """Raise when the database does not answer `SELECT 1`, (given `schema`) its schema is behind the code, or
    (SQLite) its disk is full: reads still answered then, so the check said `ok` while every write was a 503."""
    with db.engine.connect() as conn:
        conn.execute(text("SELECT 1"))
        problem = schema.problem(schema_revision(conn)) if schema is not None else None
        read_only = conn.dialect.name == "postgresql" and conn.scalar(text("SHOW transaction_read_only")) == "on"
    if read_only:  # every write a 503: the check said `ok` (a probe set default_transaction_read_only)
        raise ReadOnly(READ_ONLY_CAUSE)
    if problem is not None:
        raise SchemaNotCurrent(f"{problem}: run `neurules-admin migrate`")
    path = sqlite_file(db.engine)
    if path is not None:
        folder = os.path.dirname(os.path.abspath(path))
        st = os.statvfs(folder)
        free = st.f_bavail * st.f_frsize
        if free < MIN_FREE_BYTES:
            log.error("database disk full", extra={"folder": folder, "free_bytes": free})  # the path: in the log only
            raise DiskFull(f"the disk holding the database is full ({free} bytes free): free space there")
        probe_folder(folder)


def probe_folder(folder: str) -> None:
    """FolderUnwritable unless a small file can be created, written and removed in `folder`.

    Reads still answer on a file system that turned read-only after an I/O error (or a read-only mount), so
    `SELECT 1` said `ok` while every write was a 503."""
    path = probe_path(folder)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, b"ok")
        finally:
            os.close(fd)
        os.remove(path)
    except OSError as e:
        with contextlib.suppress(OSError):  # made, then not written (a full disk): not left behind
            os.remove(path)
        log.error("database folder unwritable", extra={"folder": folder, "error": str(e)})  # the path: in the log only
        raise FolderUnwritable(
            f"the folder of the database cannot be written ({e.strerror or type(e).__name__}): make it writable (a "
            "file system that turned read-only after an I/O error needs a repair, then a restart)"
        ) from None


def probe_path(folder: str) -> str:
    """A new name for one check's file: checks overlap (threads of one process, processes of one host or of
    containers sharing the folder), and one check's removal must not fail another's."""
    return os.path.join(folder, f"{PROBE_PREFIX}{os.getpid()}-{uuid.uuid4().hex}")


def run_check(check: Check | None) -> str:
    """`ok`, `not configured`, or `error: <what failed>`."""
    if check is None:
        return NOT_CONFIGURED
    try:
        check()
    except Exception as e:  # noqa: BLE001 -- any failure means not ready; the message says which
        return f"error: {type(e).__name__}: {short_error(e)}"
    return OK


MAX_ERROR_CHARS = 200


def short_error(e: BaseException) -> str:
    """The error on one line, without SQLAlchemy's '(Background on this error at: <url>)' note, cut at a word
    with an ellipsis beyond MAX_ERROR_CHARS (it was cut mid-word: '(Background on this error at: ht')."""
    text = " ".join(str(e).split("(Background on this error at:", 1)[0].split()) or type(e).__name__
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return text[:MAX_ERROR_CHARS].rsplit(" ", 1)[0].rstrip(" ,;:") + " ..."


@dataclass(frozen=True)
class WorkerCount:
    """Live training workers on the queue (None when they cannot be counted) and how many readiness needs."""

    live: int | None
    required: int


def count_workers(db: Database, queue: str, *, within_s: float, required: int) -> WorkerCount:
    """Workers whose heartbeat row is fresher than `within_s`; `live` None when the database cannot say."""
    try:
        with db.sessionmaker() as s:
            return WorkerCount(len(workers.live_workers(s, queue, within_s=within_s)), required)
    except Exception:  # noqa: BLE001 -- the database check reports why
        return WorkerCount(None, required)


def workers_result(count: WorkerCount) -> str:
    """The `workers` check: an error below the required number, a warning at zero when none is required."""
    if count.live is None:
        return "error: cannot count training workers: the database cannot be read (see the database check)"
    if count.live < count.required:
        return f"error: {count.live} live training worker(s), at least {count.required} required"
    if count.live == 0:
        return WARNING + "no live training worker: jobs wait queued until one starts"
    return OK


def is_ready(results: Mapping[str, str]) -> bool:
    """Ready when every check answered ok, is not configured, or only warns."""
    return all(v in (OK, NOT_CONFIGURED) or v.startswith(WARNING) for v in results.values())
