"""Database engine and session factory (SQLite or PostgreSQL, one code path), and what counts as an outage."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Literal, get_args

from sqlalchemy import Connection, Engine, create_engine, event, inspect, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from app import sqlite_identity

CONNECT_TIMEOUT_S = 5  # a server that does not answer is reported unavailable after this, not after the OS's minutes

# SQLite's OperationalError also reports bugs ("no such table"); only these messages mean "cannot use it now"
SQLITE_OUTAGES = (
    "database is locked",
    "database table is locked",
    "disk i/o error",
    "unable to open database file",
    "database or disk is full",
    "attempt to write a readonly database",
)
DRIVER_OUTAGE_CLASSES = {"OperationalError", "InterfaceError"}  # PEP 249 names: psycopg, psycopg2, ...
# PostgreSQL errors of other classes that mean "cannot be used now": 25006 read_only_sql_transaction (a standby
# after a failover, `default_transaction_read_only` on: an InternalError, so every write was a 500)
READ_ONLY_SQLSTATE = "25006"
PG_OUTAGE_SQLSTATES = {READ_ONLY_SQLSTATE}
READ_ONLY_CAUSE = "the database is read-only (a standby after a failover?): point the service at the primary"
# TCP keepalives and TCP_USER_TIMEOUT end a connection whose server vanished from the network, which no
# server-side timeout can (the statement and lock timeouts: `make_engine`'s `timeouts_ms`)
PG_CONNECT_ARGS = {
    "connect_timeout": CONNECT_TIMEOUT_S,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 30_000,
}


def is_unavailable_error(exc: BaseException) -> bool:
    """Whether a database error means the database cannot be reached or used right now (retry later), not a bug.

    Connection refused / lost / invalidated, the pool exhausted, a server's OperationalError or InterfaceError
    (shutting down, starting up, statement timeout, serialization failure), and SQLite's locked / I/O errors.
    """
    if isinstance(exc, (sa_exc.TimeoutError, sa_exc.DisconnectionError)):
        return True
    if isinstance(exc, sa_exc.DBAPIError):
        if exc.connection_invalidated:
            return True
        if not isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
            return _sqlstate(exc.orig) in PG_OUTAGE_SQLSTATES
        return _driver_outage(exc.orig) if isinstance(exc.orig, sqlite3.Error) else True
    return _driver_outage(exc)


# what an operator can act on, for the SQLite outages that have one cause (the 503's message says it)
SQLITE_OUTAGE_CAUSES = {
    "database or disk is full": (
        "the disk holding the database is full, or the temporary folder SQLite sorts large queries in (TMPDIR): "
        "free space there"
    ),
    "disk i/o error": (
        "the disk holding the database failed a read or write (an I/O error: see the kernel log); if its file "
        "system turned read-only, stop the service, repair it and start the service again"
    ),
    "attempt to write a readonly database": "the database file cannot be written (read-only): make it writable",
    "unable to open database file": "the database file cannot be opened: check that it exists and can be read",
}


def outage_cause(exc: BaseException) -> str | None:
    """What an operator can act on for a database outage with one known cause (a full disk...), else None."""
    if isinstance(exc, sqlite_identity.DatabaseFileChanged):
        return str(exc)
    orig = getattr(exc, "orig", exc)
    if _sqlstate(orig) == READ_ONLY_SQLSTATE:
        return READ_ONLY_CAUSE
    if not isinstance(orig, sqlite3.OperationalError):
        return None
    text = str(orig).lower()
    return next((cause for prefix, cause in SQLITE_OUTAGE_CAUSES.items() if text.startswith(prefix)), None)


SCHEMA_MISSING_SQLITE = ("no such table", "no such column")
SCHEMA_MISSING_SQLSTATES = {"42P01", "42703"}  # undefined table, undefined column


def is_schema_missing(exc: BaseException) -> bool:
    """A table or column the code uses is not in the database: it was not migrated to this release."""
    orig = getattr(exc, "orig", exc)
    if isinstance(orig, sqlite3.OperationalError):
        return str(orig).lower().startswith(SCHEMA_MISSING_SQLITE)
    return _sqlstate(orig) in SCHEMA_MISSING_SQLSTATES


def is_sqlite_read_only(exc: BaseException) -> bool:
    """SQLite's "attempt to write a readonly database" (raised by the driver, or wrapped by SQLAlchemy)."""
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, sqlite3.OperationalError) and "readonly database" in str(orig).lower()


def _sqlstate(exc: BaseException | None) -> str | None:
    """A PostgreSQL driver error's SQLSTATE (psycopg: `sqlstate`, psycopg2: `pgcode`), else None."""
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


def _driver_outage(exc: BaseException) -> bool:
    """The same judgement on an exception raised by a PEP 249 driver itself."""
    if isinstance(exc, sqlite3.Error):
        return isinstance(exc, sqlite3.OperationalError) and str(exc).lower().startswith(SQLITE_OUTAGES)
    names = {c.__name__ for c in type(exc).__mro__}
    if type(exc).__module__.split(".")[0] not in ("psycopg", "psycopg2"):
        return False
    return bool(names & DRIVER_OUTAGE_CLASSES) or _sqlstate(exc) in PG_OUTAGE_SQLSTATES


SqliteSynchronous = Literal["full", "normal"]


class DowngradeRefused(RuntimeError):
    """A migration's downgrade that would break a hash chain or lift a guard: nothing changed. Raised as alembic's
    CommandError too (`refused`), so that `alembic downgrade` prints one FAILED line, not a traceback."""


def refused(message: str) -> Exception:
    """The exception a migration raises to refuse a downgrade (a RuntimeError and alembic's CommandError)."""
    from alembic.util import CommandError

    class Refused(DowngradeRefused, CommandError):
        pass

    return Refused(message)


def _create_private(path: Path) -> None:
    """Create a SQLite file's folder (0700) and the empty file (0600) where missing: it holds every tenant's
    datasets, audit trail and key hashes, and SQLite gives its WAL and shm files the database file's mode."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # an existing file keeps its operator's mode; any other failure SQLite reports as it opens the file
    with contextlib.suppress(OSError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))


def make_engine(
    url: str, sqlite_synchronous: SqliteSynchronous = "full", timeouts_ms: tuple[int, int] = (0, 0)
) -> Engine:
    """Create an engine with the pragmas/pool settings the service relies on.

    SQLite runs in WAL mode; `sqlite_synchronous` "full" syncs the log at every commit, so a commit
    survives a power loss or an OS crash; "normal" syncs only at checkpoints: a commit survives the
    process crashing, and the last ones can be lost with the machine (faster: docs/audit.md).
    PostgreSQL: `timeouts_ms` (statement, lock; 0: none) bound each session's statements and lock waits: without
    them a request waited for as long as the server was slow or a lock held (a probe: 24 s behind a LOCK TABLE).
    """
    if sqlite_synchronous not in get_args(SqliteSynchronous):  # it goes into a PRAGMA as text
        raise ValueError(f"sqlite_synchronous must be one of {get_args(SqliteSynchronous)}, not {sqlite_synchronous!r}")
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if (path := sqlite_path(u)) is not None:
            _create_private(Path(path))
        elif u.database and u.database != ":memory:":  # a URI (`file:...?mode=memory&uri=true`): SQLite's to open
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        # hide_parameters: a failed statement's message (logged, in 503 causes) carried its values: uploaded rows
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, hide_parameters=True)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute(f"PRAGMA synchronous={sqlite_synchronous.upper()}")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()

        path = sqlite_file(engine)
        if path is not None:
            sqlite_identity.watch(engine, os.path.abspath(path))  # deleted or replaced underneath: an outage

        @event.listens_for(engine, "handle_error")
        def _renew_read_only(ctx: Any) -> None:
            # SQLite opens a file it cannot write read-only and keeps the connection so: one opened while the
            # file was read-only refused writes for good once it was writable again (pooled, a 503 now and then)
            if is_sqlite_read_only(ctx.original_exception):
                ctx.is_disconnect = True  # that connection and the pool's others are replaced
                ctx.invalidate_pool_on_disconnect = True

        return engine
    # pre-ping: a connection that died while pooled (server restarted) is replaced at checkout, so the
    # process recovers by itself when the database returns; a disconnect seen mid-query invalidates the pool
    engine = create_engine(
        url,
        pool_size=10,
        max_overflow=20,
        pool_pre_ping=True,
        pool_recycle=1800,
        pool_timeout=10,
        connect_args=dict(PG_CONNECT_ARGS),
        hide_parameters=True,  # a failed statement's message went to the logs with its values: uploaded rows
    )
    if any(timeouts_ms):
        timeouts = {"statement_timeout": timeouts_ms[0], "lock_timeout": timeouts_ms[1]}
        event.listen(engine, "connect", partial(_set_timeouts, timeouts))
    return engine


def _set_timeouts(timeouts: dict[str, int], dbapi_conn: Any, _record: Any) -> None:
    """SET each timeout (milliseconds; 0: none) for the session of a new connection (SET, not a startup option,
    which PgBouncer refuses unless told to ignore it; in its transaction pooling mode a session SET does not hold:
    set the timeouts on the role there, and these to 0)."""
    autocommit = dbapi_conn.autocommit
    dbapi_conn.autocommit = True  # a SET in a transaction rolled back later would be undone
    try:
        with dbapi_conn.cursor() as cur:
            for name, ms in timeouts.items():
                cur.execute(f"SET {name} = {int(ms)}")
    finally:
        dbapi_conn.autocommit = autocommit


def make_migration_engine(url: str) -> Engine:
    """`make_engine`, with every statement of a transaction inside it on SQLite too, DDL included.

    Python's sqlite3 opens a transaction only before INSERT/UPDATE/DELETE, so a migration's first ALTER or DROP
    ran (and stayed) on its own: a migration that failed later left the schema half changed under the old
    revision number. Here the driver's own handling is off and SQLAlchemy's begin issues BEGIN (SQLAlchemy's
    documented recipe for pysqlite), so a failed upgrade or downgrade changes nothing.
    """
    engine = make_engine(url)  # no statement or lock timeout: a migration may rewrite a large table
    if engine.url.get_backend_name() == "sqlite":

        @event.listens_for(engine, "connect")
        def _driver_transactions_off(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN")

    return engine


def sqlite_file(engine: Engine) -> str | None:
    """The path of the engine's database when it is a plain SQLite file (None: another database, in memory, a URI)."""
    return sqlite_path(engine.url)


def sqlite_path(url: str | URL) -> str | None:
    """The path of a database URL's plain SQLite file (None: another database, in memory, a URI)."""
    u = make_url(url)
    if u.get_backend_name() != "sqlite" or not u.database or u.database == ":memory:":
        return None
    # a URI (`file:...?mode=memory&uri=true`) is SQLite's to open; other query options (`?timeout=10`) are the
    # driver's and leave the path a plain file
    if u.database.startswith("file:") or u.query.get("uri") in ("true", "1") or u.query.get("mode") == "memory":
        return None
    return u.database


def schema_revision(conn: Connection) -> str | None:
    """The Alembic revision the database's schema is at (None: never migrated)."""
    if not inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


class Database:
    """An engine plus its session factory."""

    def __init__(
        self, url: str, sqlite_synchronous: SqliteSynchronous = "full", timeouts_ms: tuple[int, int] = (0, 0)
    ) -> None:
        self.url = url
        self.engine = make_engine(url, sqlite_synchronous, timeouts_ms)
        self.sessionmaker = sessionmaker(self.engine, expire_on_commit=False)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session that commits on success and rolls back on error."""
        s = self.sessionmaker()
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise
        finally:
            s.close()

    def dispose(self) -> None:
        """Close pooled connections."""
        self.engine.dispose()
