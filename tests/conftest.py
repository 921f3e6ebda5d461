"""Shared fixtures: hand-written rule lists, a migrated database per backend, API clients, real services."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from benchmarks.shared_data import shared_datasets

ROOT = Path(__file__).resolve().parent.parent

DATASETS = shared_datasets()  # benchmarks/shared_data.py: env, ../shared, or beside the origin
PG_ADMIN_URL = os.environ.get("NEURULES_TEST_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/neurules_test")
PG_HOST = PG_ADMIN_URL.rsplit("@", 1)[1].rsplit("/", 1)[0]  # host:port of the test PostgreSQL
REDIS_URL = os.environ.get("NEURULES_TEST_REDIS", "redis://127.0.0.1:6379/0")


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def pg_available() -> bool:
    """Whether the test PostgreSQL answers."""
    return _reachable("127.0.0.1", 5432)


def redis_available() -> bool:
    """Whether the test Redis answers."""
    return _reachable("127.0.0.1", 6379)


def http_scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """An ASGI HTTP scope for calling the app directly (a client that hangs up, bytes a test client re-encodes)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"test"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("test", 80),
    }


def rule_list_doc() -> dict[str, Any]:
    """A small hand-written rule list: numeric + categorical features, 2 rules + default."""
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "risk",
        "classes": ["low", "high"],
        "features": [
            {"name": "age", "type": "numeric", "fill_value": 50.0, "min": 20.0, "max": 80.0},
            {"name": "income", "type": "numeric", "fill_value": 30.0, "min": 0.0, "max": 200.0},
            {"name": "smoker", "type": "categorical", "categories": ["yes", "no", None]},
        ],
        "rules": [
            {
                "conditions": [
                    {"feature": "age", "op": "between", "low": 60.0, "high": None},
                    {"feature": "smoker", "op": "in", "values": ["yes"]},
                ],
                "class_counts": [3, 40],
                "probabilities": [4 / 45, 41 / 45],
            },
            {
                "conditions": [{"feature": "income", "op": "between", "low": None, "high": 10.0}],
                "class_counts": [10, 20],
                "probabilities": [11 / 32, 21 / 32],
            },
        ],
        "default": {"class_counts": [120, 30], "probabilities": [121 / 152, 31 / 152]},
        "smoothing": 1.0,
        "metadata": {},
    }


@pytest.fixture
def doc() -> dict[str, Any]:
    """A fresh copy of the hand-written rule list."""
    return rule_list_doc()


class FakeQueue:
    """Records job and evaluation ids instead of sending them to a broker; can be told to fail."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.evaluations: list[str] = []
        self.fail = False

    def send(self, job_id: str) -> None:
        """Record (or refuse) one job id."""
        if self.fail:
            raise ConnectionError("broker down")
        self.sent.append(job_id)

    def send_evaluation(self, evaluation_id: str) -> None:
        """Record (or refuse) one evaluation id."""
        if self.fail:
            raise ConnectionError("broker down")
        self.evaluations.append(evaluation_id)


def skip_unless_ci(reason: str) -> None:
    """Skip a test whose backing service is absent, but fail in CI, where `.ci/run` starts it."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must provide it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, migrated to head; dropped afterwards."""
    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    from sqlalchemy import create_engine, text

    from app.admin import migrate

    name = f"neurules_t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    migrate(url)
    yield url
    with admin.connect() as c:
        c.execute(
            text(
                f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' "
                "AND pid <> pg_backend_pid()"
            )
        )
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
    admin.dispose()


@pytest.fixture
def pg_engine(pg_database: str) -> Iterator[Any]:
    """An engine of the service's own kind (`app.db.make_engine`) on the session's PostgreSQL database."""
    from app.db import make_engine

    eng = make_engine(pg_database)
    yield eng
    eng.dispose()


def fresh_pg_database() -> tuple[str, Any]:
    """Create an empty PostgreSQL database; returns (url, drop function)."""
    from sqlalchemy import create_engine, text

    name = f"neurules_t_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as c:
            c.execute(
                text(
                    f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}' "
                    "AND pid <> pg_backend_pid()"
                )
            )
            c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
        admin.dispose()

    return PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}", drop


def _truncate_pg(url: str) -> None:
    from sqlalchemy import create_engine, text

    from app.tables import Base

    eng = create_engine(url)
    with eng.begin() as c:
        c.execute(text("TRUNCATE " + ", ".join(Base.metadata.tables) + " CASCADE"))
    eng.dispose()


@dataclass
class Api:
    """A TestClient on a migrated database with two tenants (a, b) and their keys."""

    client: Any
    app: Any
    settings: Any
    queue: FakeQueue
    url: str
    key_a: str
    key_b: str
    tenant_a: str
    tenant_b: str
    extra: dict[str, Any] = field(default_factory=dict)

    def h(self, key: str | None = None) -> dict[str, str]:
        """Auth headers for tenant a (or the given key)."""
        return {"X-API-Key": key or self.key_a}

    def count(self, table: str) -> int:
        """Rows in a table (to prove nothing was written)."""
        from sqlalchemy import text

        with self.app.state.service.db.engine.connect() as c:
            return int(c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())

    def import_model(self, document: dict[str, Any], name: str = "risk", key: str | None = None) -> dict[str, Any]:
        """Import a rule list as a new version; returns the version JSON."""
        r = self.client.post("/v1/models", json={"name": name, "rule_list": document}, headers=self.h(key))
        assert r.status_code == 201, r.text
        return r.json()  # type: ignore[no-any-return]


def make_api(tmp_path: Path, backend: str, pg_url: str | None = None, **overrides: Any) -> Iterator[Api]:
    """Build an Api on SQLite (fresh file) or PostgreSQL (shared session database, truncated)."""
    from fastapi.testclient import TestClient

    from app.admin import create_key, create_tenant, migrate
    from app.main import create_app
    from app.settings import Settings

    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'api.sqlite3'}"
        migrate(url)
    else:
        assert pg_url is not None
        url = pg_url
        _truncate_pg(url)
    overrides.setdefault("embedded_worker", False)  # no worker thread here (and torch threads left alone)
    settings = Settings(
        database_url=url,
        data_dir=tmp_path / "var",
        access_log=False,
        auth_cache_ttl_s=0,
        alias_cache_ttl_s=0,
        **overrides,
    )
    ta, tb = create_tenant(url, "tenant-a"), create_tenant(url, "tenant-b")
    _, ka = create_key(url, "tenant-a")
    _, kb = create_key(url, "tenant-b")
    queue = FakeQueue()
    app = create_app(settings, queue=queue, configure_logs=False)
    with TestClient(app) as client:
        yield Api(client, app, settings, queue, url, ka, kb, ta, tb)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The API on each database backend."""
    pg_url = request.getfixturevalue("pg_database") if request.param == "postgresql" else None
    yield from make_api(tmp_path, request.param, pg_url)


@pytest.fixture
def sqlite_api(tmp_path: Path) -> Iterator[Api]:
    """The API on SQLite only (for tests that do not depend on the backend)."""
    yield from make_api(tmp_path, "sqlite")


@pytest.fixture
def heart_csv() -> bytes:
    """The heart dataset (shared; never copied into the repository)."""
    p = DATASETS / "heart.csv"
    if not p.exists():
        skip_unless_ci(f"shared dataset missing: {p}")
    return p.read_bytes()


@dataclass
class Roles:
    """A database, its owner role and the app role (URLs for each)."""

    owner: str
    app: str
    owner_url: str
    app_url: str


def roles_env(monkeypatch: pytest.MonkeyPatch, roles: Roles, tmp: Path) -> None:
    """Point the NEURULES_* environment at the app role (service) and the owner (migrations)."""
    for k in list(os.environ):
        if k.startswith("NEURULES_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NEURULES_DATABASE_URL", roles.app_url)
    monkeypatch.setenv("NEURULES_MIGRATION_DATABASE_URL", roles.owner_url)
    monkeypatch.setenv("NEURULES_DATA_DIR", str(tmp / "var"))


@pytest.fixture(scope="module")
def roles(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Roles]:
    """Owner and app roles on a fresh database, set up with the admin commands; all dropped afterwards."""
    from sqlalchemy import create_engine, text

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    tag = uuid.uuid4().hex[:10]
    owner, app, db = f"nr_owner_{tag}", f"nr_app_{tag}", f"neurules_t_{tag}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"CREATE ROLE {owner} LOGIN CREATEROLE PASSWORD 'owner-pw'"))
        c.execute(text(f'CREATE DATABASE "{db}" OWNER {owner}'))
    r = Roles(
        owner,
        app,
        f"postgresql+psycopg://{owner}:owner-pw@{PG_HOST}/{db}",
        f"postgresql+psycopg://{app}:app-pw@{PG_HOST}/{db}",
    )
    mp = pytest.MonkeyPatch()
    try:
        _setup_roles(r, mp, tmp_path_factory.mktemp("roles"))
        yield r
    finally:
        mp.undo()
        with admin.connect() as c:
            c.execute(text(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}'"))
            c.execute(text(f'DROP DATABASE IF EXISTS "{db}"'))
            c.execute(text(f"DROP ROLE IF EXISTS {app}"))
            c.execute(text(f"DROP ROLE IF EXISTS {owner}"))
        admin.dispose()


def _setup_roles(r: Roles, mp: pytest.MonkeyPatch, tmp: Path) -> None:
    """`migrate` refuses a missing app role (nothing migrated); `create-app-role` then `migrate` succeed."""
    from sqlalchemy import create_engine, text

    from worker.cli import main

    roles_env(mp, r, tmp)
    with pytest.raises(SystemExit, match=f"the app role '{r.app}' does not exist"):
        main(["migrate"])
    eng = create_engine(r.owner_url)
    with eng.connect() as c:  # the failed grant rolled the whole migration back
        assert c.execute(text("SELECT to_regclass('audit_log')")).scalar() is None
    eng.dispose()
    main(["create-app-role"])
    main(["migrate"])
