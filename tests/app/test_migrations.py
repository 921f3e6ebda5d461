"""Alembic migrations create the ORM schema exactly, on SQLite and PostgreSQL (autogenerate: no diff)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from app.admin import migrate
from app.db import make_engine, make_migration_engine
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


def _alembic(url: str, step: Any, revision: str) -> None:
    """Run an Alembic command (upgrade or downgrade) to `revision` on the database at `url`."""
    from app.admin import alembic_config

    cfg = alembic_config()
    eng = make_migration_engine(url)
    try:
        with eng.begin() as conn:
            cfg.attributes["connection"] = conn
            step(cfg, revision)
    finally:
        eng.dispose()


def _sqlite_at(tmp_path, name: str, revision: str) -> str:
    """A SQLite database migrated to head, then taken down to `revision`; its URL."""
    from alembic import command

    url = f"sqlite:///{tmp_path / name}"
    migrate(url)
    _alembic(url, command.downgrade, revision)
    return url


TENANT_ROW = "INSERT INTO tenants (id, name, created_at) VALUES ('tn_1', 'a', '2026-01-01 00:00:00')"


def _version_row(model: str, version: int) -> str:
    """An INSERT of version `version` of `model` (id `mv_<version>` for rm_a, `mv_<model>_<version>` otherwise)."""
    vid = f"mv_{version}" if model == "rm_a" else f"mv_{model}_{version}"
    return (
        "INSERT INTO model_versions (id, tenant_id, registered_model_id, version, rule_list, text, metrics, "
        f"input_schema, provenance, created_at) VALUES ('{vid}', 'tn_1', '{model}', {version}, '{{}}', '', '{{}}', "
        "'[]', '{}', '2026-01-01 00:00:00')"
    )


def test_downgrade_and_upgrade_again(tmp_path) -> None:
    from alembic import command

    url = f"sqlite:///{tmp_path / 'd.sqlite3'}"
    migrate(url)
    _alembic(url, command.downgrade, "base")
    eng = make_engine(url)
    with eng.connect() as conn:
        assert "jobs" not in inspect(conn).get_table_names()
    eng.dispose()
    migrate(url)
    assert _diff(url) == []


def _upgrade_to(url: str, revision: str) -> None:
    from alembic import command

    _alembic(url, command.upgrade, revision)


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


def _count(url: str, table: str) -> int:
    from sqlalchemy import text

    eng = make_engine(url)
    try:
        with eng.connect() as c:
            return int(c.execute(text(f"SELECT count(*) FROM {table}")).scalar_one())
    finally:
        eng.dispose()


def test_downgrading_0006_keeps_the_jobs_progress_on_sqlite(tmp_path) -> None:
    """0006's downgrade drops its column in place: a batch rebuild dropped `jobs`, and the foreign keys' cascade
    took every job's progress points with it."""
    from alembic import command
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'p.sqlite3'}"
    migrate(url)
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text("INSERT INTO tenants (id, name, created_at) VALUES ('tn_1', 'a', '2026-01-01 00:00:00')"))
        c.execute(
            text(
                "INSERT INTO jobs (id, tenant_id, dataset_sha256, target, model_name, parameters, state, "
                "cancel_requested, epoch, n_epochs, attempts, created_at, api_key_id) VALUES ('job_1', 'tn_1', 'x', "
                "'t', 'm', '{}', 'succeeded', 0, 1, 1, 1, '2026-01-01 00:00:00', 'key_1')"
            )
        )
        c.execute(
            text("INSERT INTO job_progress_points (job_id, attempt, epoch, at) VALUES ('job_1', 1, 1, '2026-01-01')")
        )
    eng.dispose()
    _alembic(url, command.downgrade, "0005")
    assert (_count(url, "jobs"), _count(url, "job_progress_points")) == (1, 1)
    migrate(url)
    assert _diff(url) == [] and _count(url, "job_progress_points") == 1


def test_a_downgrade_below_0002_is_refused_while_the_audit_holds_rows(tmp_path) -> None:
    """It would drop the chain and missing_filled, and re-hash every row on the way back up."""
    from alembic import command

    from app.services import audit

    url = f"sqlite:///{tmp_path / 'a.sqlite3'}"
    migrate(url)
    row = {
        "created_at": datetime.now(UTC),
        "tenant_id": "tn_a",
        "api_key_id": "key_1",
        "model_version_id": "mv_1",
        "input_digest": "e" * 64,
        "output": {"prediction": 0, "probabilities": {"0": 1.0, "1": 0.0}},
        "rule_id": 0,
        "missing_filled": True,
    }
    eng = make_engine(url)
    audit.write_rows(eng, [row])
    eng.dispose()
    with pytest.raises(RuntimeError, match="audit_log holds 1 rows: a downgrade below 0002"):
        _alembic(url, command.downgrade, "0001")
    assert _diff(url) == [] and _count(url, "audit_log") == 1  # nothing changed


def test_offline_sql_is_written_for_an_empty_database(tmp_path) -> None:
    """`alembic upgrade head --sql` writes PostgreSQL's whole script (0002's chaining reads no rows offline; it
    crashed there). SQLite's table rebuilds need a live database, and alembic says so."""
    import subprocess
    import sys

    from app.admin import MIGRATIONS

    ini, url = str(MIGRATIONS.parent / "alembic.ini"), "url=postgresql+psycopg://nobody@127.0.0.1:1/none"
    argv = [sys.executable, "-m", "alembic", "-c", ini, "-x", url, "upgrade", "head", "--sql"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "CREATE TABLE audit_chain_heads" in out.stdout
    assert "UPDATE alembic_version SET version_num='0008'" in out.stdout


def test_0007_gives_the_keys_that_exist_the_full_scope_and_goes_back(tmp_path) -> None:
    """Keys made before scopes keep doing what they did (scope `full`); the downgrade keeps every key."""
    from alembic import command
    from sqlalchemy import text

    url = _sqlite_at(tmp_path, "k.sqlite3", "0006")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text(TENANT_ROW))
        c.execute(
            text(
                "INSERT INTO api_keys (id, tenant_id, prefix, key_hash, label, created_at) "
                "VALUES ('key_1', 'tn_1', 'p1', 'h', 'old', '2026-01-01 00:00:00')"
            )
        )
    migrate(url)
    with eng.connect() as c:
        assert c.execute(text("SELECT id, scope FROM api_keys")).all() == [("key_1", "full")]
    eng.dispose()
    assert _diff(url) == []
    _alembic(url, command.downgrade, "0006")
    assert _count(url, "api_keys") == 1


def test_0008_chains_the_registry_events_already_there(tmp_path) -> None:
    """Events recorded before the chain existed are linked per model in id order, and each model gets its head, so
    the verification covers them; the downgrade keeps every event."""
    from alembic import command
    from sqlalchemy import text

    from app.services.audit_verify import verify_registry

    url = _sqlite_at(tmp_path, "r.sqlite3", "0007")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text(TENANT_ROW))
        for rm in ("rm_a", "rm_b"):
            c.execute(
                text(
                    "INSERT INTO registered_models (id, tenant_id, name, created_at) "
                    f"VALUES ('{rm}', 'tn_1', '{rm}', '2026-01-01 00:00:00')"
                )
            )
        for i, rm in enumerate(["rm_a", "rm_b", "rm_a", "rm_a"]):
            c.execute(
                text(
                    "INSERT INTO registry_events (tenant_id, registered_model_id, at, action, to_version) "
                    f"VALUES ('tn_1', '{rm}', '2026-01-0{i + 1} 10:00:00.000001', 'version_created', {i + 1})"
                )
            )
            c.execute(text(_version_row(rm, i + 1)))
    eng.dispose()
    _upgrade_to(url, "0008")
    eng = make_engine(url)
    with eng.connect() as c:
        seqs = c.execute(text("SELECT registered_model_id, seq FROM registry_events ORDER BY id")).all()
        heads = dict(c.execute(text("SELECT id, events_seq FROM registered_models")).all())
    eng.dispose()
    assert [tuple(s) for s in seqs] == [("rm_a", 1), ("rm_b", 1), ("rm_a", 2), ("rm_a", 3)]
    assert heads == {"rm_a": 3, "rm_b": 1}
    _alembic(url, command.downgrade, "0007")
    assert _count(url, "registry_events") == 4
    migrate(url)  # 0008 again, then 0009 and 0010
    assert _diff(url) == []
    eng = make_engine(url)
    from sqlalchemy.orm import Session

    with Session(eng) as s:
        report = verify_registry(s, "tn_1")
    eng.dispose()
    assert report.intact and (report.models_checked, report.events_checked) == (2, 4), report


def test_0008_gives_an_alias_no_event_explains_its_event(tmp_path) -> None:
    """A reviewer: aliases (and versions) made before events were recorded (0003) had no event, so after 0008 the
    verification said `alias_state_mismatch` for ever. 0008 records one for each such version and alias (no key)
    at the end of its model's chain; an alias some event named is left to the comparison."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.services.audit_verify import verify_registry

    url = _sqlite_at(tmp_path, "b.sqlite3", "0007")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text(TENANT_ROW))
        c.execute(
            text(
                "INSERT INTO registered_models (id, tenant_id, name, created_at) "
                "VALUES ('rm_a', 'tn_1', 'risk', '2026-01-01 00:00:00')"
            )
        )
        for v in (1, 2):
            c.execute(text(_version_row("rm_a", v)))
        c.execute(
            text(
                "INSERT INTO model_aliases (registered_model_id, alias, version_id, updated_at) VALUES "
                "('rm_a', 'production', 'mv_1', '2026-01-01 00:00:00'), ('rm_a', 'staging', 'mv_2', '2026-01-01')"
            )
        )
        c.execute(
            text(
                "INSERT INTO registry_events (tenant_id, registered_model_id, at, action, alias, to_version) "
                "VALUES ('tn_1', 'rm_a', '2026-01-02 00:00:00', 'alias_set', 'staging', 2)"
            )
        )
    eng.dispose()
    migrate(url)
    eng = make_engine(url)
    with Session(eng) as s:
        report = verify_registry(s, "tn_1")
        baseline = s.execute(text("SELECT seq, alias, to_version, api_key_id FROM registry_events ORDER BY seq")).all()
    eng.dispose()
    assert report.intact and report.events_checked == 4, report
    assert [tuple(r) for r in baseline] == [
        (1, "staging", 2, None),  # the one event from before 0008
        (2, None, 1, None),  # version_created baselines: version 1, then 2
        (3, None, 2, None),
        (4, "production", 1, None),  # the alias no event named
    ]


def test_a_downgrade_below_0009_is_refused_while_a_version_is_sealed(tmp_path) -> None:
    """Dropping the seal column would leave the sealed events' hashes unverifiable: the chain would read as changed
    (a reviewer downgraded and upgraded again: content_hash_mismatch at seq 1 for good)."""
    from alembic import command

    from app.db import Database
    from app.services import registry, tenants
    from tests.conftest import rule_list_doc

    url = f"sqlite:///{tmp_path / 'seal.sqlite3'}"
    migrate(url)
    _alembic(url, command.downgrade, "0008")  # nothing sealed yet: down and up again freely
    migrate(url)
    db = Database(url)
    with db.session() as s:
        tenant = tenants.create_tenant(s, "acme")
        registry.add_version(s, tenant_id=tenant.id, name="risk", document=rule_list_doc(), metrics={}, provenance={})
        s.commit()
    db.dispose()
    with pytest.raises(RuntimeError, match="1 registry event\\(s\\) carry a model name or a details seal"):
        _alembic(url, command.downgrade, "0008")  # 0010 refuses first: the event carries its model's name
    assert _diff(url) == []  # nothing changed
    from sqlalchemy import text

    eng = make_engine(url)
    with eng.begin() as c:  # as if an older release had recorded it: sealed, but no name
        c.execute(text("UPDATE registry_events SET model_name = NULL, details_sha256 = NULL"))
    eng.dispose()
    _alembic(url, command.downgrade, "0009")
    with pytest.raises(RuntimeError, match="1 registry event\\(s\\) carry a version seal"):
        _alembic(url, command.downgrade, "0008")


def test_0010_leaves_the_chains_and_bind_model_names_binds_the_models_already_there(tmp_path) -> None:
    """0010 only adds columns (an older release still lists every event, and a downgrade works until a named event
    exists); models made before it carry no name in their chains until `bind-model-names` (or their next event)
    records one, after which two of them swapping names in the database is named."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from app.admin import bind_model_names
    from app.services.audit_verify import verify_registry

    url = _sqlite_at(tmp_path, "n.sqlite3", "0007")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text(TENANT_ROW))
        for rm, name in (("rm_a", "risk"), ("rm_b", "other")):
            c.execute(
                text(
                    "INSERT INTO registered_models (id, tenant_id, name, created_at) "
                    f"VALUES ('{rm}', 'tn_1', '{name}', '2026-01-01 00:00:00')"
                )
            )
            c.execute(text(_version_row(rm, 1)))
    migrate(url)
    swap = [
        "UPDATE registered_models SET name = 'x' WHERE id = 'rm_a'",
        "UPDATE registered_models SET name = 'risk' WHERE id = 'rm_b'",
        "UPDATE registered_models SET name = 'other' WHERE id = 'rm_a'",
    ]
    with Session(eng) as s:
        assert verify_registry(s, "tn_1").intact
        assert s.execute(text("SELECT COUNT(*) FROM registry_events WHERE model_name IS NOT NULL")).scalar() == 0
    from alembic import command

    _alembic(url, command.downgrade, "0009")  # nothing named yet: down and up again
    migrate(url)
    assert bind_model_names(url) == [("tn_1", "other"), ("tn_1", "risk")]
    assert bind_model_names(url) == []  # each model once
    with Session(eng) as s:
        bound = s.execute(text("SELECT model_name, action, seq FROM registry_events ORDER BY model_name, seq")).all()
        assert verify_registry(s, "tn_1").intact
    assert [tuple(b) for b in bound] == [
        (None, "version_created", 1),  # 0008's baselines (no name)
        (None, "version_created", 1),
        ("other", "name_bound", 2),
        ("risk", "name_bound", 2),
    ]
    with eng.begin() as c:
        for stmt in swap:
            c.execute(text(stmt))
    with Session(eng) as s:
        broken = verify_registry(s, "tn_1").first_break
    eng.dispose()
    assert broken is not None and broken.kind == "model_name_mismatch" and broken.model == "other", broken
    with pytest.raises(RuntimeError, match="2 registry event\\(s\\) carry a model name"):
        _alembic(url, command.downgrade, "0009")


def test_0011_adds_the_approval_policy_off_and_goes_back_until_a_review_or_a_gate_exists(tmp_path) -> None:
    """Tenants that exist get `require_approval` off (nothing changes for them); a downgrade is refused while a review
    is recorded (its event's hash holds the columns it would drop) or a tenant requires approval (the gate would be
    lifted silently); without either it goes down and up again."""
    from alembic import command
    from sqlalchemy import text

    from app.admin import set_policy
    from app.db import Database
    from app.services import registry, reviews, tenants
    from app.tables import Evaluation, new_id
    from tests.conftest import rule_list_doc

    url = _sqlite_at(tmp_path, "gate.sqlite3", "0010")
    eng = make_engine(url)
    with eng.begin() as c:
        c.execute(text(TENANT_ROW))
        assert "require_approval" not in {col["name"] for col in inspect(c).get_columns("tenants")}
    migrate(url)
    with eng.connect() as c:
        assert c.execute(text("SELECT require_approval, approval_policy_changed_at FROM tenants")).one() == (0, None)
    _alembic(url, command.downgrade, "0010")  # nothing recorded: down and up freely
    migrate(url)
    assert _diff(url) == []
    set_policy(url, "a", True)
    with pytest.raises(RuntimeError, match="1 tenant\\(s\\) require approval"):
        _alembic(url, command.downgrade, "0010")
    # the alembic command line says it in one FAILED line (an operator probe read it under a traceback)
    cli = subprocess.run(
        [sys.executable, "-m", "alembic", "-c", "alembic.ini", "-x", f"url={url}", "downgrade", "0010"],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode != 0 and "Traceback" not in cli.stderr, cli.stderr
    assert "ERROR [alembic.util.messaging] 1 tenant(s) require approval" in cli.stderr, cli.stderr
    set_policy(url, "a", False)
    db = Database(url)
    with db.session() as s:
        other = tenants.create_tenant(s, "acme")
        mv = registry.add_version(
            s, tenant_id=other.id, name="risk", document=rule_list_doc(), metrics={}, provenance={}
        )
        s.add(
            Evaluation(
                id=new_id("ev"),
                tenant_id=other.id,
                model_version_id=mv.id,
                dataset_id="ds_x",
                target="risk",
                state="succeeded",
            )
        )
        s.commit()
    with db.session() as s:
        reviews.review_version(s, other.id, "risk", 1, decision="approve", note="ok", api_key_id="key_reviewer")
    db.dispose()
    with pytest.raises(RuntimeError, match="1 registry event\\(s\\) record a review"):
        _alembic(url, command.downgrade, "0010")
    assert _diff(url) == []  # nothing changed
    eng.dispose()


@pytest.mark.integration
def test_0011_goes_down_and_up_on_postgresql() -> None:
    from alembic import command

    from tests.conftest import fresh_pg_database, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable")
    url, drop = fresh_pg_database()
    try:
        migrate(url)
        _alembic(url, command.downgrade, "0010")
        eng = make_engine(url)
        with eng.connect() as conn:
            assert "require_approval" not in {c["name"] for c in inspect(conn).get_columns("tenants")}
            assert "decision" not in {c["name"] for c in inspect(conn).get_columns("registry_events")}
        eng.dispose()
        migrate(url)
        assert _diff(url) == []
    finally:
        drop()
