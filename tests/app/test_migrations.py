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


def _upgrade_to(url: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from app.admin import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["configure_logging"] = False
    eng = make_engine(url)
    try:
        with eng.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
    finally:
        eng.dispose()


def _legacy_rows(url: str) -> list[int]:
    """Rows as revision 0001 wrote them (no chain), two tenants interleaved; their ids."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import text

    t0 = datetime(2026, 11, 20, 8, 0, tzinfo=UTC)
    eng = make_engine(url)
    try:
        with eng.begin() as c:
            for i in range(7):
                c.execute(
                    text(
                        "INSERT INTO audit_log (created_at, tenant_id, api_key_id, model_version_id, input_digest, "
                        "output, rule_id) VALUES (:t, :tenant, 'key_1', 'mv_1', :d, :o, :r)"
                    ),
                    {
                        "t": t0 + timedelta(seconds=i, microseconds=i),
                        "tenant": "tn_a" if i % 3 else "tn_b",
                        "d": f"{i:064x}",
                        "o": '{"prediction": 1, "probabilities": {"0": 0.25, "1": 0.75}}',
                        "r": i % 2,
                    },
                )
        with eng.connect() as c:
            return list(c.execute(text("SELECT id FROM audit_log ORDER BY id")).scalars())
    finally:
        eng.dispose()


def _chain_after_0002(url: str) -> None:
    """Upgrade a 0001 database holding rows; every row is chained, per tenant in id order, and writes go on."""
    from datetime import UTC, datetime

    from sqlalchemy import text

    from app.admin import verify_audit
    from app.services import audit

    _upgrade_to(url, "0001")
    ids = _legacy_rows(url)
    migrate(url)
    assert _diff(url) == []
    eng = make_engine(url)
    try:
        with eng.connect() as c:
            got = c.execute(text("SELECT id, tenant_id, seq, missing_filled FROM audit_log ORDER BY id")).all()
        assert [r.id for r in got] == ids
        assert [(r.tenant_id, r.seq) for r in got] == [
            ("tn_b", 1), ("tn_a", 1), ("tn_a", 2), ("tn_b", 2), ("tn_a", 3), ("tn_a", 4), ("tn_b", 3),
        ]  # fmt: skip
        assert all(r.missing_filled is None for r in got)  # not recorded before 0002
        reports = {r.tenant_id: r for r in verify_audit(url)}
        assert {t: (r.intact, r.rows_checked) for t, r in reports.items()} == {"tn_a": (True, 4), "tn_b": (True, 3)}
        new = {
            "created_at": datetime.now(UTC),
            "tenant_id": "tn_a",
            "api_key_id": "key_2",
            "model_version_id": "mv_2",
            "input_digest": "f" * 64,
            "output": {"prediction": 0, "probabilities": {"0": 1.0, "1": 0.0}},
            "rule_id": 0,
            "missing_filled": True,
        }
        audit.write_rows(eng, [new])
        (after,) = verify_audit(url, "tn_a")
        assert after.intact and after.rows_checked == 5 and after.head is not None and after.head.seq == 5
        with eng.begin() as c, pytest.raises(Exception, match="append-only"):  # the triggers are back
            c.execute(text(f"DELETE FROM audit_log WHERE id = {ids[0]}"))
    finally:
        eng.dispose()


def test_0002_chains_existing_rows_sqlite(tmp_path) -> None:
    _chain_after_0002(f"sqlite:///{tmp_path / 'legacy.sqlite3'}")


@pytest.mark.integration
def test_0002_chains_existing_rows_postgresql() -> None:
    from tests.conftest import fresh_pg_database, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable")
    url, drop = fresh_pg_database()
    try:
        _chain_after_0002(url)
    finally:
        drop()
