"""`neurules-admin` subcommands (in-process, SQLite under a temporary data dir)."""

from __future__ import annotations

import json

import pytest

from worker.cli import main
from worker.serve import port_in_use, reuseport_socket


@pytest.fixture
def env(tmp_path, monkeypatch) -> str:
    for k in list(__import__("os").environ):
        if k.startswith("NEURULES_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NEURULES_DATA_DIR", str(tmp_path / "var"))
    return str(tmp_path)


def test_tenant_key_lifecycle(env, capsys) -> None:
    main(["create-tenant", "acme"])
    tenant_id = capsys.readouterr().out.strip()
    assert tenant_id.startswith("tn_")
    with pytest.raises(SystemExit, match="already exists"):
        main(["create-tenant", "acme"])
    main(["create-key", "acme", "--label", "ci"])
    out = capsys.readouterr()
    key = out.out.strip()
    assert key.startswith("nrk_") and "not shown again" in out.err
    main(["list-tenants"])
    listed = json.loads(capsys.readouterr().out)
    assert listed[0]["name"] == "acme" and listed[0]["keys"][0]["label"] == "ci" and key not in json.dumps(listed)
    main(["revoke-key", listed[0]["keys"][0]["id"]])
    main(["list-tenants"])
    capsys.readouterr()
    with pytest.raises(SystemExit, match="no tenant"):
        main(["create-key", "nobody"])


def test_create_tenant_and_key_say_which_database(env, capsys, monkeypatch, tmp_path) -> None:
    """Embedded mode's database is relative to the working directory (./var): the admin commands name the file they
    wrote to, so a tenant created from another directory than the server's is not a silent 401 later."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NEURULES_DATA_DIR", "var")
    main(["create-tenant", "acme"])
    out = capsys.readouterr()
    assert out.out.strip().startswith("tn_")  # stdout stays the id alone
    assert str(tmp_path / "var" / "neurules.sqlite3") in out.err
    main(["create-key", "acme"])
    out = capsys.readouterr()
    assert out.out.strip().startswith("nrk_") and str(tmp_path / "var" / "neurules.sqlite3") in out.err


def test_migrate_config_reap(env, capsys) -> None:
    main(["migrate"])
    assert "migrated embedded database" in capsys.readouterr().out
    main(["config"])
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["mode"] == "embedded" and cfg["database_url"].startswith("sqlite") and cfg["embedded_worker"]
    main(["reap"])
    assert json.loads(capsys.readouterr().out) == []


def test_port_probe_and_reuseport() -> None:
    s = reuseport_socket("127.0.0.1", 0)
    try:
        port = s.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
    finally:
        s.close()
    assert not port_in_use("127.0.0.1", port)


def test_roles_are_for_postgresql_and_config_hides_passwords(env, capsys, monkeypatch) -> None:
    with pytest.raises(SystemExit, match="SQLite has no roles"):
        main(["create-app-role"])
    main(["config"])
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["app_role"] is None and cfg["migration_database_url"] == cfg["database_url"]
    monkeypatch.setenv("NEURULES_DATABASE_URL", "postgresql+psycopg://app:app-secret@db/neurules")
    monkeypatch.setenv("NEURULES_MIGRATION_DATABASE_URL", "postgresql+psycopg://owner:owner-secret@db/neurules")
    main(["config"])
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["app_role"] == "app" and "secret" not in json.dumps(cfg)
    assert cfg["database_url"] == "postgresql+psycopg://app:***@db/neurules"
    monkeypatch.setenv("NEURULES_MIGRATION_DATABASE_URL", "postgresql+psycopg://owner@db/elsewhere")
    with pytest.raises(SystemExit, match="must name the same database"):
        main(["config"])


def test_worker_alive_reads_this_hosts_heartbeat(env, capsys) -> None:
    """The compose worker's health check: 0 with a fresh heartbeat row on this host, 1 with none or a stale one."""
    import socket
    from datetime import timedelta

    from app.admin import migrate
    from app.db import Database
    from app.services import workers
    from app.tables import utcnow
    from worker.cli import load_settings

    settings = load_settings()
    migrate(settings.resolved_database_url)
    with pytest.raises(SystemExit) as none:
        main(["worker-alive"])
    assert none.value.code == 1 and "no worker on" in capsys.readouterr().err
    db = Database(settings.resolved_database_url)
    beat_at = utcnow() - timedelta(seconds=settings.worker_alive_s + 1)
    with db.session() as s:
        workers.beat(s, name="celery@here/1", queue=settings.queue, hostname=socket.gethostname(), pid=1, now=beat_at)
    with pytest.raises(SystemExit) as stale:
        main(["worker-alive"])
    assert stale.value.code == 1
    with db.session() as s:
        workers.beat(s, name="celery@here/1", queue=settings.queue, hostname=socket.gethostname(), pid=1)
    db.dispose()
    with pytest.raises(SystemExit) as alive:
        main(["worker-alive"])
    assert alive.value.code == 0 and json.loads(capsys.readouterr().out) == {"alive": ["celery@here/1"]}
