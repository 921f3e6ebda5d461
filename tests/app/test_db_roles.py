"""PostgreSQL roles: migrations as the owner, the service as an app role that cannot rewrite the audit.

The `roles` fixture (tests/conftest.py): a fresh database owned by a fresh owner role, the app role
set up by `neurules-admin create-app-role` and `migrate`. Each forbidden statement is tried as the
app role and its error asserted; the owner's tampering is found by verify-audit; the service runs
under the app role.
"""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from tests.conftest import FakeQueue, Roles, roles_env, rule_list_doc

pytestmark = pytest.mark.integration


def _tables(url: str) -> set[str]:
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            return set(c.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).scalars())
    finally:
        eng.dispose()


def _run(url: str, *stmts: str) -> None:
    eng = create_engine(url)
    try:
        with eng.begin() as c:
            for stmt in stmts:
                c.execute(text(stmt))
    finally:
        eng.dispose()


def _storage_id(url: str, tenant: str, seq: int) -> int:
    """The audit row's storage id (the API shows only its seq)."""
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            q = "SELECT a.id FROM audit_log a JOIN tenants t ON t.id = a.tenant_id WHERE t.name = :n AND a.seq = :s"
            return int(c.execute(text(q), {"n": tenant, "s": seq}).scalar_one())
    finally:
        eng.dispose()


FORBIDDEN = [
    ("TRUNCATE audit_log", "permission denied for table audit_log"),
    ("UPDATE audit_log SET rule_id = 1", "permission denied for table audit_log"),
    ("DELETE FROM audit_log", "permission denied for table audit_log"),
    ("ALTER TABLE audit_log ADD COLUMN note text", "must be owner of table audit_log"),
    ("DROP TABLE audit_log", "must be owner of table audit_log"),
    ("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_change", "must be owner of table audit_log"),
    ("DROP TRIGGER audit_log_no_change ON audit_log", "must be owner of relation audit_log"),
    (
        "CREATE OR REPLACE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql "
        "AS $$ BEGIN RETURN OLD; END $$",
        "permission denied for schema public",  # checked before ownership of the function
    ),
    ("DROP FUNCTION audit_log_append_only() CASCADE", "must be owner of function audit_log_append_only"),
    ("DELETE FROM audit_chain_heads", "permission denied for table audit_chain_heads"),
    ("TRUNCATE audit_chain_heads", "permission denied for table audit_chain_heads"),
    ("TRUNCATE jobs", "permission denied for table jobs"),
    ("ALTER TABLE jobs ADD COLUMN note text", "must be owner of table jobs"),
    ("CREATE TABLE scratch (x int)", "permission denied for schema public"),
    ("UPDATE alembic_version SET version_num = '0001'", "permission denied for table alembic_version"),
    ("SELECT setval('audit_log_id_seq', 1)", "permission denied for sequence audit_log_id_seq"),
    ("UPDATE registry_events SET to_version = 1", "permission denied for table registry_events"),
    ("DELETE FROM registry_events", "permission denied for table registry_events"),
    ("UPDATE job_progress_points SET loss = 0", "permission denied for table job_progress_points"),
    ("DELETE FROM job_progress_points", "permission denied for table job_progress_points"),
]


@pytest.mark.parametrize(("stmt", "error"), FORBIDDEN, ids=[s.split(" (")[0][:40] for s, _ in FORBIDDEN])
def test_app_role_cannot(roles: Roles, stmt: str, error: str) -> None:
    with pytest.raises(DBAPIError, match=error):
        _run(roles.app_url, stmt)


def test_app_role_rights(roles: Roles) -> None:
    """It appends and reads the audit, moves chain heads, has full DML elsewhere, and owns nothing."""
    _run(
        roles.app_url,
        "INSERT INTO tenants (id, name, created_at) VALUES ('tn_rights', 'rights', now())",
        "UPDATE tenants SET name = 'rights2' WHERE id = 'tn_rights'",
        "INSERT INTO registered_models (id, tenant_id, name, created_at) VALUES ('rm_rights', 'tn_rights', 'm', now())",
        "INSERT INTO registry_events (tenant_id, registered_model_id, at, action, seq, prev_hash, row_hash) "
        "VALUES ('tn_rights', 'rm_rights', now(), 'version_created', 1, repeat('0', 64), repeat('1', 64))",
        "UPDATE registered_models SET events_seq = 1, events_hash = repeat('1', 64) WHERE id = 'rm_rights'",
        "SELECT count(*) FROM registry_events",
        "DELETE FROM tenants WHERE id = 'tn_rights'",  # its events go with it (the owner's cascade)
        "INSERT INTO audit_chain_heads VALUES ('tn_rights', 0, repeat('0', 64), now())",
        "UPDATE audit_chain_heads SET seq = 0 WHERE tenant_id = 'tn_rights'",
        "SELECT count(*) FROM audit_log",
        "SELECT version_num FROM alembic_version",
    )
    eng = create_engine(roles.owner_url)
    with eng.connect() as c:
        owned = c.execute(
            text("SELECT count(*) FROM pg_class k JOIN pg_roles r ON k.relowner = r.oid WHERE r.rolname = :r"),
            {"r": roles.app},
        ).scalar_one()
        flags = c.execute(
            text("SELECT rolsuper, rolcreaterole, rolcreatedb FROM pg_roles WHERE rolname = :r"), {"r": roles.app}
        ).one()
    eng.dispose()
    assert owned == 0 and tuple(flags) == (False, False, False)


def test_migrate_refuses_an_owning_app_role(roles: Roles) -> None:
    """Granting to the migration role itself, or to a superuser, is refused with the reason."""
    from app.db_roles import RoleError, grant_app_role

    eng = create_engine(roles.owner_url)
    try:
        with eng.begin() as c, pytest.raises(RoleError, match="is the role migrations run as"):
            grant_app_role(c, roles.owner)
        with eng.begin() as c, pytest.raises(RoleError, match="is a superuser"):
            grant_app_role(c, "postgres")
    finally:
        eng.dispose()


def test_create_app_role_runs_again_under_an_owner_with_createrole(roles: Roles, tmp_path, monkeypatch) -> None:
    """Re-running it (to re-password) as a non-superuser owner works; a right the role gained meanwhile is
    named by migrate and taken away by create-app-role."""
    from worker.cli import main

    roles_env(monkeypatch, roles, tmp_path)
    main(["create-app-role"])  # the ALTER named NOSUPERUSER, which only a superuser may: a traceback before
    _run(roles.owner_url, f"ALTER ROLE {roles.app} CREATEDB")
    with pytest.raises(SystemExit, match=f"the app role '{roles.app}' holds CREATEDB"):
        main(["migrate"])
    main(["create-app-role"])
    main(["migrate"])
    _run(roles.app_url, "SELECT 1")  # still logs in with its password


def test_service_under_the_app_role_and_owner_tampering_found(roles: Roles, tmp_path, monkeypatch, capsys) -> None:
    """One predict and one verify through the API as the app role; the owner's edits then show up in verify-audit."""
    from fastapi.testclient import TestClient

    from app.admin import create_key, create_tenant
    from app.main import create_app
    from app.settings import Settings
    from worker.cli import main

    name = f"t-{uuid.uuid4().hex[:6]}"
    create_tenant(roles.app_url, name)
    _, key = create_key(roles.app_url, name)
    settings = Settings(
        database_url=roles.app_url,
        migration_database_url=roles.owner_url,
        data_dir=tmp_path / "var",
        embedded_worker=False,
        access_log=False,
    )
    with TestClient(create_app(settings, queue=FakeQueue(), configure_logs=False)) as client:
        h = {"X-API-Key": key}
        v = client.post("/v1/models", json={"name": "risk", "rule_list": rule_list_doc()}, headers=h).json()
        rec = {"age": 67, "income": 50, "smoker": "yes"}
        r = client.post(f"/v1/models/{v['id']}/predict", json={"records": [rec, rec, rec]}, headers=h)
        assert r.status_code == 200, r.text
        report = client.get("/v1/audit/verify", headers=h).json()
        assert report["intact"] and report["rows_checked"] == 3, report
        # the governance tables under the app role: an alias move, its event, monitoring over the audit
        assert client.put("/v1/registered-models/risk/aliases/prod", json={"version": 1}, headers=h).status_code == 200
        events = client.get("/v1/registered-models/risk/events", headers=h).json()["items"]
        assert [e["action"] for e in events] == ["alias_set", "version_created"]
        assert client.get("/v1/models/risk@prod/monitoring", headers=h).json()["total"] == 3
        seqs = [i["seq"] for i in client.get("/v1/audit", headers=h).json()["items"]][::-1]
        ids = [_storage_id(roles.owner_url, name, seq) for seq in seqs]

    lifted = "ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_change"
    back = "ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_change"
    roles_env(monkeypatch, roles, tmp_path)
    _run(roles.owner_url, lifted, f"UPDATE audit_log SET output = '{{}}' WHERE id = {ids[1]}", back)
    with pytest.raises(SystemExit) as exit_code:
        main(["verify-audit", "--tenant", name])  # runs as the app role: SELECT is all it needs
    brk = json.loads(capsys.readouterr().out)["first_break"]
    assert exit_code.value.code == 1 and brk["kind"] == "content_hash_mismatch" and brk["row_id"] == ids[1]
    _run(roles.owner_url, lifted, f"DELETE FROM audit_log WHERE id = {ids[1]}", back)
    with pytest.raises(SystemExit):
        main(["verify-audit", "--tenant", name])
    brk = json.loads(capsys.readouterr().out)["first_break"]
    assert brk["kind"] == "sequence_gap" and brk["row_id"] == ids[2] and "seq 2 missing" in brk["message"]
