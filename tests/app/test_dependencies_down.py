"""A database, broker or audit store that cannot be reached answers 503 naming it, with `Retry-After`, never a 500.

Unit level: the running app's engines are pointed at a database that refuses connections (a port nothing
listens on, a SQLite file that cannot be opened, a SQLite file another connection holds the write lock
of). The real outages (PostgreSQL and Redis stopped under load) are in tests/e2e/test_faults.py.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, exc
from sqlalchemy.orm import sessionmaker

from app.db import is_unavailable_error
from app.errors import install_error_handlers
from app.services.refresh_cache import RefreshAheadCache
from tests.conftest import Api
from tests.e2e.conftest import free_port

REC = {"age": 70, "income": 5, "smoker": "yes"}
CSV = b"age,income,smoker\n70,5,yes\n30,50,no\n"


def point_at(api: Api, engine: Engine) -> None:
    """Make every database user of the running app (sessions, model store, auth, audit writer) use `engine`."""
    state = api.app.state.service
    state.db.engine = engine
    state.db.sessionmaker = sessionmaker(engine, expire_on_commit=False)
    state.audit.close()  # its own connection is dropped; the next write starts it again on the new engine
    state.audit.engine = engine


def refusing_engine() -> Engine:
    """An engine on a PostgreSQL port nothing listens on (every connect is refused)."""
    return create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x", pool_pre_ping=True)


def seeded(api: Api, doc: dict[str, Any]) -> dict[str, str]:
    """Ids of one dataset, job, version and alias of tenant a, created while the database is up."""
    c, h = api.client, api.h()
    ds = c.post("/v1/datasets", files={"file": ("d.csv", b"x,y\n" + b"1,0\n2,1\n" * 10, "text/csv")}, headers=h)
    job = c.post("/v1/jobs", json={"dataset_id": ds.json()["id"], "target": "y"}, headers=h)
    v = api.import_model(doc)
    alias = c.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=h)
    assert ds.status_code == 201 and job.status_code == 202 and alias.status_code == 200, (ds.text, job.text)
    return {"ds": ds.json()["id"], "job": job.json()["id"], "v": v["id"]}


# every kind of endpoint; `{v}` etc. are filled from `seeded`
CALLS: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/datasets", {}),
    ("GET", "/v1/datasets/{ds}", {}),
    ("POST", "/v1/datasets", {"files": {"file": ("d.csv", CSV, "text/csv")}}),
    ("DELETE", "/v1/datasets/{ds}", {}),
    ("GET", "/v1/jobs", {}),
    ("GET", "/v1/jobs/{job}", {}),
    ("POST", "/v1/jobs", {"json": {"dataset_id": "{ds}", "target": "y"}}),
    ("POST", "/v1/jobs/{job}/cancel", {}),
    ("GET", "/v1/models", {}),
    ("GET", "/v1/models/{v}", {}),
    ("GET", "/v1/models/risk@production", {}),
    ("GET", "/v1/models/{v}/export", {"params": {"format": "sql"}}),
    ("GET", "/v1/registered-models", {}),
    ("PUT", "/v1/registered-models/risk/aliases/staging", {"json": {"version": 1}}),
    ("POST", "/v1/models/risk@production/predict", {"json": {"records": [REC]}}),  # alias not cached
    ("POST", "/v1/models/{v}/predict", {"json": {"records": [REC]}}),  # version cached: the audit write fails
    ("POST", "/v1/models/{v}/predict.csv", {"files": {"file": ("r.csv", CSV, "text/csv")}}),
    ("GET", "/v1/audit", {}),
]


def _fill(o: Any, ids: dict[str, str]) -> Any:
    if isinstance(o, str):
        return o.format(**ids)
    if isinstance(o, dict):
        return {k: _fill(v, ids) for k, v in o.items()}
    return o


def assert_unavailable(r: Any, codes: tuple[str, ...] = ("database_unavailable", "audit_unavailable")) -> None:
    """A 503 in the error shape, naming the dependency, with Retry-After."""
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] in codes, err
    assert int(r.headers["retry-after"]) > 0


def test_every_endpoint_answers_503_while_the_database_refuses(api: Api, doc: dict[str, Any]) -> None:
    ids = seeded(api, doc)
    state = api.app.state.service
    state.auth_cache = RefreshAheadCache(100, 600)  # key a stays authenticated: the audit write is what fails
    api.client.post(f"/v1/models/{ids['v']}/predict", json={"records": [REC]}, headers=api.h())  # cache the version
    good = state.db.engine
    client = TestClient(api.app, raise_server_exceptions=False)
    point_at(api, refusing_engine())
    for method, path, kw in CALLS:
        r = client.request(method, path.format(**ids), headers=api.h(), **_fill(kw, ids))
        assert_unavailable(r)
        if "predict" in path and "{v}" in path and not path.endswith(".csv"):
            assert r.json()["error"]["code"] == "audit_unavailable", path
    r = client.get("/v1/datasets", headers=api.h(api.key_b))  # a key not in the cache: auth needs the database
    assert_unavailable(r, ("database_unavailable",))
    # the database returns: everything answers again, and nothing was written while it was away
    point_at(api, good)
    counts = {t: api.count(t) for t in ("datasets", "jobs", "model_versions", "model_aliases", "audit_log")}
    assert counts == {"datasets": 1, "jobs": 1, "model_versions": 1, "model_aliases": 1, "audit_log": 1}
    assert len(api.queue.sent) == 1
    r = client.post("/v1/models/risk@production/predict", json={"records": [REC]}, headers=api.h())
    assert r.status_code == 200, r.text


def test_a_sqlite_file_that_cannot_be_opened_is_503(sqlite_api: Api, tmp_path: Any) -> None:
    point_at(sqlite_api, create_engine(f"sqlite:///{tmp_path / 'gone' / 'no.sqlite3'}"))
    r = TestClient(sqlite_api.app, raise_server_exceptions=False).get("/v1/datasets", headers=sqlite_api.h())
    assert_unavailable(r, ("database_unavailable",))


def test_a_locked_sqlite_database_is_503_and_leaves_nothing(sqlite_api: Api, doc: dict[str, Any]) -> None:
    v = sqlite_api.import_model(doc)
    sqlite_api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=sqlite_api.h())
    path = sqlite_api.app.state.service.db.engine.url.database
    point_at(sqlite_api, create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.2}))
    holder = sqlite3.connect(path, timeout=0.2, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        client = TestClient(sqlite_api.app, raise_server_exceptions=False)
        r = client.post("/v1/models", json={"name": "other", "rule_list": doc}, headers=sqlite_api.h())
        assert_unavailable(r, ("database_unavailable",))
        r = client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=sqlite_api.h())
        assert_unavailable(r, ("audit_unavailable",))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert sqlite_api.count("model_versions") == 1 and sqlite_api.count("audit_log") == 1


def _orig(e: BaseException) -> exc.DBAPIError:
    return exc.OperationalError("SELECT 1", {}, e)


UNAVAILABLE = [
    _orig(sqlite3.OperationalError("database is locked")),
    _orig(sqlite3.OperationalError("disk I/O error")),
    _orig(sqlite3.OperationalError("unable to open database file")),
    _orig(Exception("connection refused")),  # any server database's OperationalError
    exc.InterfaceError("SELECT 1", {}, Exception("connection already closed")),
    exc.DBAPIError("SELECT 1", {}, Exception("server closed the connection"), connection_invalidated=True),
    exc.TimeoutError("QueuePool limit of size 10 overflow 20 reached"),
]
NOT_UNAVAILABLE = [
    _orig(sqlite3.OperationalError("no such table: datasets")),  # a bug, not an outage
    exc.IntegrityError("INSERT", {}, Exception("duplicate key")),
    exc.ProgrammingError("SELECT", {}, Exception("syntax error")),
    ValueError("not a database error"),
]


def test_the_classifier() -> None:
    import psycopg

    assert all(is_unavailable_error(e) for e in UNAVAILABLE)
    assert is_unavailable_error(psycopg.OperationalError("connection failed"))  # raw driver errors too
    assert is_unavailable_error(sqlite3.OperationalError("database is locked"))
    assert not any(is_unavailable_error(e) for e in NOT_UNAVAILABLE)


def _raising(e: BaseException) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise e

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize("e", UNAVAILABLE, ids=lambda e: type(e).__name__)
def test_database_outages_map_to_503_at_the_edge(e: BaseException) -> None:
    assert_unavailable(_raising(e).get("/boom"), ("database_unavailable",))


def test_other_database_errors_stay_500_without_leaking_sql() -> None:
    r = _raising(NOT_UNAVAILABLE[1]).get("/boom")
    assert r.status_code == 500 and r.json()["error"]["code"] == "internal_error"
    assert "duplicate" not in r.text and "retry-after" not in r.headers


def test_broker_down_is_503_with_retry_after(sqlite_api: Api) -> None:
    c, h = sqlite_api.client, sqlite_api.h()
    ds = c.post("/v1/datasets", files={"file": ("d.csv", b"x,y\n" + b"1,0\n2,1\n" * 10, "text/csv")}, headers=h)
    sqlite_api.queue.fail = True
    r = c.post("/v1/jobs", json={"dataset_id": ds.json()["id"], "target": "y"}, headers=h)
    assert_unavailable(r, ("broker_unavailable",))
    assert sqlite_api.count("jobs") == 0


def test_openapi_documents_503_on_every_endpoint_that_uses_a_dependency(sqlite_api: Api) -> None:
    spec = sqlite_api.client.get("/openapi.json").json()
    missing = [
        f"{m.upper()} {p}"
        for p, ops in spec["paths"].items()
        if p.startswith("/v1/")
        for m, op in ops.items()
        if "503" not in op["responses"] or "Retry-After" not in op["responses"]["503"].get("headers", {})
    ]
    assert not missing, missing
    assert "503" in spec["paths"]["/readyz"]["get"]["responses"]


def test_metrics_scrape_survives_the_database(sqlite_api: Api) -> None:
    """Database down: the scrape answers, without job counts (never false zeros) and says so; back: counts again."""
    up = sqlite_api.app.state.service.db.engine
    point_at(sqlite_api, refusing_engine())
    r = TestClient(sqlite_api.app, raise_server_exceptions=False).get("/metrics")
    assert r.status_code == 200 and "neurules_jobs_ok 0.0" in r.text
    assert "neurules_jobs{" not in r.text
    point_at(sqlite_api, up)
    r = sqlite_api.client.get("/metrics")
    assert 'neurules_jobs{state="queued"} 0.0' in r.text and "neurules_jobs_ok 1.0" in r.text


def test_readyz_names_the_database_when_it_is_down(sqlite_api: Api) -> None:
    point_at(sqlite_api, refusing_engine())
    r = sqlite_api.client.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["database"].startswith("error")


def test_readyz_names_a_full_disk(sqlite_api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault probe filled the disk under the SQLite file: every write was a 503 naming the full disk, but
    /readyz said `database: ok` (reads answered) and blamed the workers. It names the disk now."""
    from types import SimpleNamespace

    from app.services import readiness

    assert sqlite_api.client.get("/readyz").json()["checks"]["database"] == "ok"
    monkeypatch.setattr(readiness.os, "statvfs", lambda _: SimpleNamespace(f_bavail=100, f_frsize=4096))
    r = sqlite_api.client.get("/readyz")
    assert r.status_code == 503, r.text
    check = r.json()["checks"]["database"]
    assert check.startswith("error: DiskFull: the disk holding the database is full (409600 bytes free"), check


@pytest.mark.integration
def test_a_restarted_database_is_used_again_without_a_failed_request(tmp_path: Any, doc: dict[str, Any]) -> None:
    """Every server connection the app holds is killed (as a restart does): the next requests reconnect, none fails.

    The audit writer keeps its own connection between batches; the pool pre-pings the others.
    """
    from sqlalchemy import text

    from app.admin import migrate
    from tests.conftest import PG_ADMIN_URL, fresh_pg_database, make_api, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    url, drop = fresh_pg_database()
    try:
        migrate(url)
        for api in make_api(tmp_path, "postgresql", url):
            v = api.import_model(doc)
            for _ in range(2):
                r = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=api.h())
                assert r.status_code == 200, r.text
                admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
                with admin.connect() as c:
                    killed = c.execute(
                        text(
                            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                            "WHERE datname = :db AND pid <> pg_backend_pid()"
                        ),
                        {"db": url.rsplit("/", 1)[1]},
                    ).scalar_one()
                admin.dispose()
                assert killed >= 1
            r = api.client.get("/v1/audit", headers=api.h())
            assert r.status_code == 200 and len(r.json()["items"]) == 2
    finally:
        drop()


def test_connections_opened_while_the_sqlite_file_was_read_only_are_replaced(
    sqlite_api: Api, doc: dict[str, Any]
) -> None:
    """SQLite opens a file it cannot write read-only and keeps the connection so. After the file had been
    read-only for a while, the pooled connections opened meanwhile refused writes for good: uploads, jobs and
    predict.csv answered 503 now and then until a restart (a fault probe with a read-only bind mount). Such a
    connection (here: every pooled one, made read-only with `PRAGMA query_only`, which fails writes with the
    same error) is replaced at its first refused write, with the rest of the pool."""
    v = sqlite_api.import_model(doc)["id"]
    engine = sqlite_api.app.state.service.db.engine
    held = [engine.raw_connection() for _ in range(engine.pool.size())]  # type: ignore[attr-defined]
    for c in held:
        c.driver_connection.execute("PRAGMA query_only=ON")
        c.close()  # back into the pool, read-only
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    record = {"age": 70, "income": 5, "smoker": "yes"}
    codes = []
    for _ in range(8):
        up = client.post(
            "/v1/datasets", files={"file": ("d.csv", b"a,t\n1,0\n2,1\n", "text/csv")}, headers=sqlite_api.h()
        )
        csv = client.post(
            f"/v1/models/{v}/predict.csv",
            files={"file": ("b.csv", b"age,income,smoker\n70,5,yes\n", "text/csv")},
            headers=sqlite_api.h(),
        )
        one = client.post(f"/v1/models/{v}/predict", json={"records": [record]}, headers=sqlite_api.h())
        codes.append((up.status_code, csv.status_code, one.status_code))
    assert all(c in (201, 200, 503) for trio in codes for c in trio), codes
    assert codes[-4:] == [(201, 200, 200)] * 4, codes  # recovered by itself, not only after a restart


def test_a_full_disk_or_a_read_only_file_is_named_in_the_503(sqlite_api: Api, doc: dict[str, Any]) -> None:
    """A full disk answered 503 "the database is unavailable" (the audit: "could not be written"), nothing
    saying what an operator could do (a fault probe with a 24 MB tmpfs). The message now names the cause SQLite
    gave: a full disk, a read-only file. (SQLite's page limit fails writes with the same error as a full disk.)"""
    v = sqlite_api.import_model(doc)["id"]
    engine = sqlite_api.app.state.service.db.engine
    held = [engine.raw_connection() for _ in range(engine.pool.size())]  # type: ignore[attr-defined]
    for c in held:
        pages = c.driver_connection.execute("PRAGMA page_count").fetchone()[0]
        c.driver_connection.execute(f"PRAGMA max_page_count={pages}")
        c.close()
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    big = b"a,t\n" + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(20_000))
    up = client.post("/v1/datasets", files={"file": ("d.csv", big, "text/csv")}, headers=sqlite_api.h())
    assert up.status_code == 503 and "disk holding the database is full" in up.json()["error"]["message"], up.text
    rows = b"age,income,smoker\n" + b"70,5,yes\n" * 5_000
    csv = client.post(
        f"/v1/models/{v}/predict.csv", files={"file": ("b.csv", rows, "text/csv")}, headers=sqlite_api.h()
    )
    assert csv.status_code == 503 and "disk holding the database is full" in csv.json()["error"]["message"], csv.text


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_database_file_deleted_or_replaced_underneath_is_503_not_a_lost_decision(
    sqlite_api: Api, doc: dict[str, Any], how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault probe deleted the SQLite file under a running service (and in another run put a backup copy in its
    place): the next decisions were answered 200 with audit rows written to the unlinked file (lost with it; in
    the backup's case, seqs the file at the path never held), then every request was a 500 ("no such table").
    Each request now answers 503 naming what happened, and no decision is answered without its audit row."""
    import shutil
    from pathlib import Path

    from sqlalchemy.engine import make_url

    v = sqlite_api.import_model(doc)["id"]
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    first = client.post(f"/v1/models/{v}/predict", json={"records": [REC]}, headers=sqlite_api.h())
    assert first.status_code == 200, first.text
    path = Path(make_url(sqlite_api.url).database or "")
    if how == "deleted":
        path.unlink()
    else:
        backup = path.with_name("backup.sqlite3")
        shutil.copy(path, backup)  # a copy of the file as it is now (a restore), put in its place
        backup.replace(path)
    answers = {
        "predict": client.post(f"/v1/models/{v}/predict", json={"records": [REC]}, headers=sqlite_api.h()),
        "datasets": client.get("/v1/datasets", headers=sqlite_api.h()),
        "upload": client.post("/v1/datasets", files={"file": ("d.csv", CSV, "text/csv")}, headers=sqlite_api.h()),
        "audit": client.get("/v1/audit", headers=sqlite_api.h()),
    }
    for what, r in answers.items():
        assert r.status_code == 503, (what, r.status_code, r.text)
        assert "was deleted or replaced while the service ran" in r.json()["error"]["message"], (what, r.text)
        assert str(sqlite_api.settings.data_dir.parent) not in r.text, (what, r.text)  # no server path (a probe saw it)
    named = [x for x in caplog.records if "deleted or replaced" in x.getMessage() and getattr(x, "path", None)]
    assert len(named) == 1, named  # the operator's log has the path, once
    assert answers["predict"].json()["error"]["code"] in ("audit_unavailable", "database_unavailable")
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "deleted or replaced" in ready.text, ready.text


def _terminate_backends(db_name: str) -> None:
    """End every server connection to `db_name` (new ones read the database's settings again)."""
    from sqlalchemy import text

    from tests.conftest import PG_ADMIN_URL

    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :db AND pid <> pg_backend_pid()"
            ),
            {"db": db_name},
        )
    admin.dispose()


def _alter_database(db_name: str, setting: str) -> None:
    from sqlalchemy import text

    from tests.conftest import PG_ADMIN_URL

    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'ALTER DATABASE "{db_name}" {setting}'))
    admin.dispose()


@pytest.mark.integration
def test_a_read_only_postgresql_is_503_and_not_ready(tmp_path: Any, doc: dict[str, Any]) -> None:
    """A fault probe made PostgreSQL read-only (as a standby after a failover): every write was a 500 (the driver's
    ReadOnlySqlTransaction is an InternalError) and /readyz said the database was ok."""
    from app.admin import migrate
    from tests.conftest import fresh_pg_database, make_api, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    url, drop = fresh_pg_database()
    db_name = url.rsplit("/", 1)[1]
    try:
        migrate(url)
        for api in make_api(tmp_path, "postgresql", url):
            api.import_model(doc)
            _alter_database(db_name, "SET default_transaction_read_only = on")
            _terminate_backends(db_name)
            r = api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h())
            assert_unavailable(r, ("database_unavailable",))
            assert "read-only" in r.json()["error"]["message"], r.text
            r = api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=api.h())
            assert_unavailable(r, ("database_unavailable",))
            ready = api.client.get("/readyz")
            assert ready.status_code == 503 and "read-only" in ready.json()["checks"]["database"], ready.text
            _alter_database(db_name, "RESET default_transaction_read_only")
            _terminate_backends(db_name)
            r = api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=api.h())
            assert r.status_code == 200, r.text
            assert api.client.get("/readyz").status_code == 200
    finally:
        drop()


@pytest.mark.integration
def test_postgresql_sessions_bound_statements_and_lock_waits(tmp_path: Any) -> None:
    """A request waited 24 s behind a `LOCK TABLE` a probe held (no statement or lock timeout): the service's
    sessions are bounded (NEURULES_DATABASE_STATEMENT_TIMEOUT_S, _LOCK_TIMEOUT_S), a lock wait beyond the bound is
    an outage (503); migrations and the admin commands are not bounded."""
    from sqlalchemy import text

    from app import db as app_db
    from app.settings import Settings
    from tests.conftest import fresh_pg_database, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    url, drop = fresh_pg_database()
    try:
        timeouts = Settings(database_url=url, data_dir=tmp_path).database_timeouts_ms
        assert timeouts == (30_000, 10_000)
        engine, migration = app_db.make_engine(url, timeouts_ms=timeouts), app_db.make_migration_engine(url)
        with engine.connect() as c:
            assert (c.scalar(text("SHOW statement_timeout")), c.scalar(text("SHOW lock_timeout"))) == ("30s", "10s")
        with migration.connect() as c:
            assert (c.scalar(text("SHOW statement_timeout")), c.scalar(text("SHOW lock_timeout"))) == ("0", "0")
        quick = app_db.make_engine(url, timeouts_ms=(0, 300))
        with engine.begin() as holder:
            holder.execute(text("CREATE TABLE t (x int)"))
        with engine.connect() as holder:
            holder.execute(text("LOCK TABLE t"))
            with pytest.raises(exc.DBAPIError) as info, quick.connect() as c:
                c.execute(text("SELECT * FROM t"))
            assert is_unavailable_error(info.value)
            holder.rollback()
        for e in (engine, migration, quick):
            e.dispose()
    finally:
        drop()


class ResponseError(Exception):
    """Named as redis-py's error for a reply: the broker answered, and refused."""


class _DeadSession:
    """A session whose database went away: every statement fails as an outage."""

    def execute(self, *_: Any) -> None:
        raise exc.OperationalError("DELETE FROM jobs", {}, Exception("server closed the connection"))

    def commit(self) -> None:
        raise AssertionError("nothing to commit")

    def rollback(self) -> None:
        pass


def _refusing(error: BaseException) -> Any:
    def send(_id: str) -> None:
        raise error

    return send


def test_a_broker_refusal_says_why_and_a_row_the_database_cannot_withdraw_is_named() -> None:
    """A fault probe: with Redis out of memory every job was a 503 "the job broker is unreachable" (it answered,
    and refused); with the database gone too, the 503 said "nothing was created" and the job trained later."""
    from app.services.errors import Unavailable
    from app.services.jobs import send_or_undo
    from app.tables import Job

    row = Job(id="job_0123", tenant_id="tn_1")
    oom = ResponseError("OOM command not allowed when used memory > 'maxmemory'.")
    wrapped = RuntimeError("send failed")
    wrapped.__cause__ = oom  # as kombu wraps redis-py's error
    with pytest.raises(Unavailable) as info:
        send_or_undo(_DeadSession(), _refusing(wrapped), row, "job")  # type: ignore[arg-type]
    message = info.value.message
    assert "refused the message (send failed)" in message, message
    assert "job_0123" in message and "stays queued" in message and "GET /v1/jobs/job_0123" in message, message
    assert info.value.code == "broker_unavailable"
    with pytest.raises(Unavailable) as info:
        send_or_undo(_DeadSession(), _refusing(ConnectionError("refused")), row, "evaluation")  # type: ignore[arg-type]
    assert info.value.message.startswith("the job broker is unreachable, and the database could not withdraw")
    assert "GET /v1/evaluations/job_0123" in info.value.message


def test_a_queued_job_and_evaluation_are_answered_without_reading_them_back(sqlite_api: Api, doc: dict) -> None:
    """The answer to a queued evaluation was a 503 when the database went away right after its commit and send
    (the version and the row were read again to make it), and the evaluation then ran: a client retrying made
    two. The answer is now made from what was stored, with the session closed (no read possible)."""
    from app.schemas.jobs import JobCreate
    from app.services import evaluations
    from app.services.auth import Principal
    from app.services.job_submission import JobLimits, submit_job

    c, h = sqlite_api.client, sqlite_api.h()
    ds = c.post(
        "/v1/datasets",
        files={"file": ("d.csv", b"age,income,smoker,y\n" + b"50,3,yes,0\n70,1,no,1\n" * 10, "text/csv")},
        headers=h,
    )
    assert ds.status_code == 201, ds.text
    v = sqlite_api.import_model(doc)
    service = sqlite_api.app.state.service
    session = service.db.sessionmaker()
    caller = Principal(tenant_id=sqlite_api.tenant_a, key_id=None)
    body = JobCreate.model_validate({"dataset_id": ds.json()["id"], "target": "y"})
    job = submit_job(session, sqlite_api.queue, caller, body, JobLimits(10, 50, 500, 8))
    request = evaluations.EvaluationRequest(ds.json()["id"], "y")
    row, version = evaluations.create_evaluation(
        session, sqlite_api.queue, sqlite_api.tenant_a, v["id"], request, sync_max_rows=0
    )
    session.close()  # any read of an expired attribute now raises
    from app.schemas.jobs import JobPublic

    assert JobPublic.from_row(job).id == job.id and job.id in sqlite_api.queue.sent
    assert row.state == "queued" and row.id in sqlite_api.queue.evaluations and version.id == v["id"]
    from app.routers.evaluations import public

    assert public(row, version).id == row.id


def test_a_database_not_migrated_is_a_503_saying_to_migrate() -> None:
    """A README probe started the API without `migrate`: /readyz said so, but every /v1 call was a 500 (`no such
    table: api_keys`). A table or column missing is an operator's step, not a bug."""
    import psycopg

    for missing in (
        _orig(sqlite3.OperationalError("no such table: api_keys")),
        exc.ProgrammingError("SELECT", {}, psycopg.errors.UndefinedTable('relation "api_keys" does not exist')),
        exc.ProgrammingError("SELECT", {}, psycopg.errors.UndefinedColumn('column "model_name" does not exist')),
    ):
        r = _raising(missing).get("/boom")
        assert_unavailable(r, ("database_unavailable",))
        assert "neurules-admin migrate" in r.json()["error"]["message"], r.text
    r = _raising(exc.ProgrammingError("SELECT", {}, psycopg.errors.SyntaxError("syntax error"))).get("/boom")
    assert r.status_code == 500  # a bug stays a 500


def test_readyz_names_a_database_folder_that_refuses_writes(sqlite_api: Api, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk-fault probe turned the database's file system read-only under the service (ext4 after an I/O error):
    every write was a 503 while /readyz said `database: ok` (reads answered). Each check now writes a small file
    beside the database; here its name is taken by a folder, so the write fails as on such a file system."""
    from pathlib import Path

    from sqlalchemy.engine import make_url

    from app.services import readiness

    assert sqlite_api.client.get("/readyz").json()["checks"]["database"] == "ok"
    folder = Path(make_url(sqlite_api.url).database or "").resolve().parent
    assert [p.name for p in folder.glob(".neurules-ready-*")] == []  # removed after each check
    blocker = folder / f"{readiness.PROBE_PREFIX}taken"
    blocker.mkdir()
    monkeypatch.setattr(readiness, "probe_path", lambda _folder: str(blocker))
    try:
        r = sqlite_api.client.get("/readyz")
    finally:
        blocker.rmdir()
    assert r.status_code == 503, r.text
    check = r.json()["checks"]["database"]
    assert check.startswith("error: FolderUnwritable: the folder of the database cannot be written (Is a directory)")
    assert str(folder) not in r.text  # the server's paths stay in its log
    monkeypatch.undo()
    assert sqlite_api.client.get("/readyz").json()["checks"]["database"] == "ok"


def test_overlapping_readiness_checks_do_not_fail_each_other(tmp_path) -> None:
    """Each check names its file anew: with one name per process, overlapping checks (threads of the threadpool)
    removed each other's file and reported a writable folder as unwritable (a reviewer's run: 116 of 12,000)."""
    from concurrent.futures import ThreadPoolExecutor

    from app.services import readiness

    def check(_: int) -> str:
        try:
            readiness.probe_folder(str(tmp_path))
        except readiness.FolderUnwritable as e:
            return str(e)
        return "ok"

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(check, range(2000)))
    assert set(results) == {"ok"} and list(tmp_path.iterdir()) == []


def test_a_disk_io_error_is_named_with_what_to_do() -> None:
    """The same probe: the 503 said only "the database is unavailable" (SQLite's "disk I/O error")."""
    import sqlite3

    from app.db import is_unavailable_error, outage_cause

    err = sqlite3.OperationalError("disk I/O error")
    assert is_unavailable_error(err)
    cause = outage_cause(err) or ""
    assert cause.startswith("the disk holding the database failed a read or write") and "repair it" in cause
    full = outage_cause(sqlite3.OperationalError("database or disk is full")) or ""
    assert "TMPDIR" in full  # SQLite sorts a large query in the temporary folder: a full one reads the same
