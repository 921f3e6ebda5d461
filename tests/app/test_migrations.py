"""Alembic migrations create the ORM schema exactly, on SQLite and PostgreSQL (autogenerate: no diff)."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.admin import migrate
from app.db import make_engine
from app.tables import Base


def _diff(url: str) -> list:
    eng = make_engine(url)
    try:
        with eng.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diff = compare_metadata(ctx, Base.metadata)
            tables = set(inspect(conn).get_table_names())
    finally:
        eng.dispose()
    assert set(Base.metadata.tables) <= tables
    return diff


def test_sqlite_no_diff(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'm.sqlite3'}"
    migrate(url)
    assert _diff(url) == []
    migrate(url)  # idempotent


@pytest.mark.integration
def test_postgresql_no_diff() -> None:
    from tests.conftest import fresh_pg_database, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable")
    url, drop = fresh_pg_database()
    try:
        migrate(url)
        assert _diff(url) == []
    finally:
        drop()


def test_downgrade_and_upgrade_again(tmp_path) -> None:
    from alembic import command
    from alembic.config import Config

    from app.admin import MIGRATIONS

    url = f"sqlite:///{tmp_path / 'd.sqlite3'}"
    migrate(url)
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["configure_logging"] = False
    eng = make_engine(url)
    with eng.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    with eng.connect() as conn:
        assert "jobs" not in inspect(conn).get_table_names()
    eng.dispose()
    migrate(url)
    assert _diff(url) == []
