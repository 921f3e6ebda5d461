"""`neurules-admin` subcommands (in-process, SQLite under a temporary data dir)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

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
    key_id = listed[0]["keys"][0]["id"]
    main(["revoke-key", key_id])
    assert capsys.readouterr().out.startswith(f"revoked {key_id}")
    main(["revoke-key", key_id])  # again: the first revocation's time stays (it was moved to now)
    first = capsys.readouterr().out
    assert "was revoked already, at" in first
    main(["revoke-key", key_id])
    assert capsys.readouterr().out == first
    with pytest.raises(SystemExit, match="no tenant"):
        main(["create-key", "nobody"])


def test_a_tenant_name_differing_only_in_case_or_unicode_form_is_refused(env, capsys) -> None:
    """`Acme` beside `acme` (or `Größe` composed beside decomposed) reads as one tenant: a key issued to one would be
    taken for the other's. A name that names no tenant points at its twin."""
    main(["create-tenant", "Acme"])
    main(["create-tenant", "Gr\u00f6\u00dfe"])
    capsys.readouterr()
    for twin, existing in (("acme", "Acme"), ("ACME", "Acme"), ("Gro\u0308\u00dfe", "Gr\u00f6\u00dfe")):
        with pytest.raises(SystemExit, match=f"only in case or Unicode form from the existing tenant '{existing}'"):
            main(["create-tenant", twin])
    with pytest.raises(SystemExit, match="no tenant 'acme'; did you mean 'Acme'"):
        main(["create-key", "acme"])
    with pytest.raises(SystemExit, match="no tenant 'acme'; did you mean 'Acme'"):
        main(["set-policy", "acme", "--require-approval", "on"])
    with pytest.raises(SystemExit) as verify:  # an operator probe: verify-audit gave no pointer
        main(["verify-audit", "--tenant", "acme"])
    assert verify.value.code == 2 and "did you mean 'Acme'" in capsys.readouterr().err
    main(["create-tenant", "Acme Corp"])  # reads differently: allowed
    capsys.readouterr()
    main(["list-tenants"])
    assert sorted(t["name"] for t in json.loads(capsys.readouterr().out)) == ["Acme", "Acme Corp", "Gr\u00f6\u00dfe"]


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
    other = tmp_path / "elsewhere"  # a newcomer in another directory: no database there, which it names
    other.mkdir()
    monkeypatch.chdir(other)
    with pytest.raises(SystemExit) as info:
        main(["create-key", "acme"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "holds no NeuRules database" in err, err
    assert str(other / "var" / "neurules.sqlite3") in err and not (other / "var" / "neurules.sqlite3").exists()
    main(["create-tenant", "beta"])  # a database there now: an unknown tenant is named with it
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:
        main(["create-key", "acme"])
    assert "no tenant 'acme'" in str(info.value) and str(other / "var" / "neurules.sqlite3") in str(info.value)


def test_migrate_config_reap(env, capsys) -> None:
    main(["migrate"])
    assert "migrated the embedded database" in capsys.readouterr().out
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


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A local port that refuses connections: bound (so nothing else takes it) but not listening."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    yield s.getsockname()[1]
    s.close()


def _exit_message(argv: list[str]) -> str:
    """The one-line message `main(argv)` exits with (a traceback fails the test)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert isinstance(e.value.code, str), e.value.code
    assert "\n" not in e.value.code and "Traceback" not in e.value.code
    return e.value.code


def test_database_errors_are_one_line(env, closed_port, monkeypatch, capsys) -> None:
    """An unmigrated or unreachable database is a one-line message naming it (password hidden), not a traceback;
    an error that is not the database's keeps its traceback."""
    assert "is not migrated (no such table: jobs): run `neurules-admin migrate`" in _exit_message(["reap"])
    url = f"postgresql+psycopg://app:s3cret@127.0.0.1:{closed_port}/neurules"
    monkeypatch.setenv("NEURULES_DATABASE_URL", url)
    for argv in (["create-tenant", "x"], ["create-key", "x"], ["revoke-key", "k"], ["list-tenants"], ["reap"]):
        msg = _exit_message(argv)
        assert msg.startswith(f"neurules-admin: cannot reach the database at {url.replace('s3cret', '***')}: ")
        assert "refused" in msg and "s3cret" not in msg
    with pytest.raises(SystemExit) as verify:  # nothing checked: 2, not the 1 of a broken chain
        main(["verify-audit"])
    assert verify.value.code == 2 and "cannot reach the database" in capsys.readouterr().err
    monkeypatch.setenv("NEURULES_MIGRATION_DATABASE_URL", url.replace("app:s3cret", "owner"))
    assert "cannot reach the database at postgresql+psycopg://owner@" in _exit_message(["migrate"])

    def bug(url: str) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("app.admin.list_tenants", bug)
    with pytest.raises(KeyError, match="a bug"):
        main(["list-tenants"])


@pytest.mark.integration
def test_unmigrated_postgresql_database_says_migrate(env, monkeypatch) -> None:
    from tests.conftest import fresh_pg_database, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    url, drop = fresh_pg_database()
    try:
        monkeypatch.setenv("NEURULES_DATABASE_URL", url)
        for argv in (["create-tenant", "x"], ["list-tenants"]):
            msg = _exit_message(argv)
            assert msg.startswith(f"neurules-admin: the database at {url} is not migrated (relation ")
            assert msg.endswith("does not exist): run `neurules-admin migrate`")
        with pytest.raises(SystemExit) as verify:
            main(["verify-audit"])
        assert verify.value.code == 2  # nothing checked: not a pass
    finally:
        drop()


@pytest.mark.integration
def test_verify_audit_refuses_a_postgresql_schema_behind_this_release(env, capsys, monkeypatch) -> None:
    """As on SQLite: a PostgreSQL database behind this release is refused with exit 2 and what to do (it exited 1,
    a broken chain, on a query for a column the old schema lacks), and left at its revision."""
    from alembic import command

    from app.admin import schema_revision_of
    from tests.app.test_migrations import _alembic
    from tests.conftest import fresh_pg_database, pg_available, skip_unless_ci

    if not pg_available():
        skip_unless_ci("PostgreSQL not reachable on 127.0.0.1:5432")
    url, drop = fresh_pg_database()
    try:
        _alembic(url, command.upgrade, "0010")
        monkeypatch.setenv("NEURULES_DATABASE_URL", url)
        with pytest.raises(SystemExit) as info:
            main(["verify-audit"])
        message = capsys.readouterr().err
        assert info.value.code == 2, (info.value.code, message)
        assert "older than the" in message and "neurules-admin migrate" in message, message
        assert schema_revision_of(url) == "0010"
    finally:
        drop()


def test_verify_audit_never_passes_a_database_that_is_not_there(env, capsys, tmp_path, monkeypatch) -> None:
    """A mistyped data directory, an empty file or a SQLite file of something else: exit 2 naming why, and nothing
    created (it migrated a new empty database and reported it intact, exit 0)."""
    import sqlite3

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "neurules.sqlite3").touch()
    other = tmp_path / "other.sqlite3"
    with sqlite3.connect(other) as c:
        c.execute("CREATE TABLE notes (x)")
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "neurules.sqlite3").write_text("hello world, not a database\n" * 100)
    for setup, expected in (
        ({"NEURULES_DATA_DIR": str(tmp_path / "typo")}, "no database at"),
        ({"NEURULES_DATA_DIR": str(tmp_path / "empty")}, "is empty"),
        ({"NEURULES_DATABASE_URL": f"sqlite:///{other}"}, "holds no NeuRules schema"),
        ({"NEURULES_DATA_DIR": str(tmp_path / "text")}, "cannot be read as a database"),  # exit 1 before
    ):
        for k, v in setup.items():
            monkeypatch.setenv(k, v)
        with pytest.raises(SystemExit) as verify:
            main(["verify-audit"])
        assert verify.value.code == 2 and expected in capsys.readouterr().err
        monkeypatch.delenv("NEURULES_DATABASE_URL", raising=False)
    assert not (tmp_path / "typo").exists()
    assert (tmp_path / "empty" / "neurules.sqlite3").stat().st_size == 0
    with sqlite3.connect(other) as c:  # left as it was: not switched to WAL mode either (the service's engine did)
        assert [r[0] for r in c.execute("SELECT name FROM sqlite_master")] == ["notes"]
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    monkeypatch.setenv("NEURULES_DATA_DIR", str(tmp_path / "var"))
    main(["create-tenant", "acme"])  # a real one: checked, exit 0
    with pytest.raises(SystemExit) as verify:
        main(["verify-audit"])
    assert verify.value.code == 0


def test_tenant_names_and_labels_are_checked(env, capsys) -> None:
    """Names and labels longer than their columns, blank names, control characters and id-shaped names are refused
    with a message naming the argument; nothing is created."""
    from app.tables import ApiKey, Tenant

    limit, label_limit = Tenant.name.type.length, ApiKey.label.type.length
    assert f"tenant name: {limit + 1} characters; at most {limit}" in _exit_message(
        ["create-tenant", "x" * (limit + 1)]
    )
    for bad, why in [
        ("", "empty or blank"),
        ("   ", "empty or blank"),
        (" acme", "start or end with whitespace"),
        ("a\nb", "control or invisible characters (found U+000A)"),
        ("a\u202eb", "control or invisible characters (found U+202E)"),
        ("tn_0123456789abcdef01234567", "looks like a tenant id"),
        ("TN_00ff", "looks like a tenant id"),
    ]:
        msg = _exit_message(["create-tenant", bad])
        assert msg.startswith("neurules-admin: tenant name: ") and why in msg
    main(["list-tenants"])
    assert json.loads(capsys.readouterr().out) == []
    main(["create-tenant", "y" * limit])  # the limit itself fits
    main(["create-tenant", "tn_ but with words"])
    capsys.readouterr()
    msg = _exit_message(["create-key", "y" * limit, "--label", "l" * (label_limit + 1)])
    assert msg == f"neurules-admin: label: {label_limit + 1} characters; at most {label_limit} are allowed"
    for bad, found in [("second \u202egnp.exe", "U+202E"), ("a\tb", "U+0009"), ("zero\u200bwidth", "U+200B")]:
        # a bidi override in a label reversed the key id shown after it (console, CLI): who did what, spoofed
        msg = _exit_message(["create-key", "y" * limit, "--label", bad])
        assert msg == f"neurules-admin: label: must not contain control or invisible characters (found {found})"
    main(["create-key", "y" * limit, "--label", "l" * label_limit])
    capsys.readouterr()
    main(["list-tenants"])
    listed = {t["name"]: t for t in json.loads(capsys.readouterr().out)}
    assert set(listed) == {"y" * limit, "tn_ but with words"}
    assert [k["label"] for k in listed["y" * limit]["keys"]] == ["l" * label_limit]


def test_tenant_lookup_is_unambiguous(env, capsys) -> None:
    """A tenant is found by id, else by name; a value that is one tenant's id and another's name (a name from before
    names shaped like ids were refused) is refused naming both, never a key for the wrong tenant."""
    from app.db import Database
    from app.tables import Tenant, new_id
    from worker.cli import load_settings

    main(["create-tenant", "acme"])
    acme = capsys.readouterr().out.strip()
    assert "looks like a tenant id" in _exit_message(["create-tenant", acme])
    main(["create-key", acme, "--label", "by id"])
    main(["create-key", "acme", "--label", "by name"])
    capsys.readouterr()
    db = Database(load_settings().resolved_database_url)
    with db.session() as s:
        s.add(Tenant(id=(legacy := new_id("tn")), name=acme))
    db.dispose()
    msg = _exit_message(["create-key", acme, "--label", "which?"])
    assert f"both the id of tenant 'acme' and the name of tenant {legacy}" in msg
    with pytest.raises(SystemExit) as audit:
        main(["verify-audit", "--tenant", acme])
    assert audit.value.code == 2 and legacy in capsys.readouterr().err
    main(["list-tenants"])
    keys = {t["id"]: [k["label"] for k in t["keys"]] for t in json.loads(capsys.readouterr().out)}
    assert keys == {acme: ["by id", "by name"], legacy: []}


@pytest.fixture
def no_server(monkeypatch) -> None:
    """`serve` must stop before a server process runs (the test fails instead of serving) and leaves logging alone."""

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("a server process was started")

    monkeypatch.setattr("worker.serve._serve_process", started)
    monkeypatch.setattr("worker.serve._supervise", started)
    monkeypatch.setattr("worker.serve.configure_logging", lambda level: None)
    monkeypatch.setenv("NEURULES_EMBEDDED_WORKER", "false")


def test_serve_flags_are_checked_like_the_variables(env, no_server, monkeypatch) -> None:
    """`serve --port/--workers/--host` go through the settings' own bounds (1..65535, 1..64) and are used as given."""
    served: list[tuple[str, int, int]] = []
    monkeypatch.setattr(
        "worker.serve.serve", lambda settings, host, port, workers, mig: served.append((host, port, workers))
    )
    for flags, problem in [
        (["--port", "70000"], "--port 70000: Input should be less than or equal to 65535"),
        (["--port", "-1"], "--port -1: Input should be greater than or equal to 1"),
        (["--port", "0"], "--port 0: Input should be greater than or equal to 1"),
        (["--workers", "0"], "--workers 0: Input should be greater than or equal to 1"),
        (["--workers", "-1"], "--workers -1: Input should be greater than or equal to 1"),
        (["--workers", "65"], "--workers 65: Input should be less than or equal to 64"),
    ]:
        assert _exit_message(["serve", *flags]) == f"neurules-admin: invalid configuration: {problem}"
    for host in ("", " "):  # an empty host is every interface to a socket, not the loopback default
        assert "invalid configuration: --host" in _exit_message(["serve", "--host", host])
    monkeypatch.setenv("NEURULES_WORKERS", "65")
    assert "NEURULES_WORKERS: Input should be less than or equal to 64" in _exit_message(["serve"])
    monkeypatch.setenv("NEURULES_WORKERS", "3")
    monkeypatch.setenv("NEURULES_PORT", "9001")
    main(["serve"])
    main(["serve", "--host", "0.0.0.0", "--port", "65535", "--workers", "64"])
    assert served == [("127.0.0.1", 9001, 3), ("0.0.0.0", 65535, 64)]


def test_serve_bind_failure_is_one_line(env, no_server, closed_port) -> None:
    """An unknown host or a port another socket holds is one line and exit 1, before any lock, migration or server."""
    msg = _exit_message(["serve", "--no-migrate", "--host", "999.1.1.1", "--port", "8123"])
    assert msg.startswith("neurules-admin: cannot listen on 999.1.1.1:8123: ")
    msg = _exit_message(["serve", "--no-migrate", "--port", str(closed_port)])
    assert msg.startswith(f"neurules-admin: cannot listen on 127.0.0.1:{closed_port}: Address already in use")
    assert not port_in_use("127.0.0.1", closed_port)  # the probe's listener is closed again


def _sleep_a_minute() -> None:
    time.sleep(60)


def test_a_server_process_stopped_alone_makes_serve_exit_non_zero() -> None:
    """One of the server processes stopped by a SIGTERM of its own: the others are stopped and `serve` exits
    non-zero (it exited 0, so a manager restarting on failure left the API down)."""
    import multiprocessing
    import os
    import signal

    from worker.serve import _supervise

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_sleep_a_minute) for _ in range(2)]
    for p in procs:
        p.start()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        os.kill(procs[0].pid, signal.SIGTERM)  # type: ignore[arg-type]
        with pytest.raises(
            SystemExit, match=r"server processes exited with .*process 0 \(pid \d+\): killed by SIGTERM"
        ):
            _supervise(procs, 1)
        assert not any(p.is_alive() for p in procs)
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        for p in procs:
            p.kill()
            p.join(5)


def test_a_schema_migrated_by_a_newer_release_is_served_not_a_traceback(env, no_server, capsys, caplog) -> None:
    """An upgrade probe: after a newer release migrated the database (a rolling upgrade, or a rollback to this
    release), `serve` and every embedded admin command stopped with Alembic's "Can't locate revision" traceback,
    although the code runs on that schema. They say so and go on; `migrate` says there is nothing it can do."""
    import logging
    import sqlite3
    from pathlib import Path

    main(["migrate"])
    capsys.readouterr()
    with sqlite3.connect(Path(env) / "var" / "neurules.sqlite3") as con:
        con.execute("UPDATE alembic_version SET version_num = '9999_from_a_newer_release'")
    main(["create-tenant", "acme"])
    assert capsys.readouterr().out.strip().startswith("tn_")
    main(["migrate"])
    said = capsys.readouterr().out
    assert "revision 9999_from_a_newer_release, newer than this release's" in said and "not migrated" in said
    past_the_migrations = pytest.raises(AssertionError, match="a server process was started")
    with caplog.at_level(logging.WARNING, logger="neurules.cli"), past_the_migrations:
        main(["serve", "--port", str(_free_port())])
    assert any("newer than this release" in r.getMessage() for r in caplog.records)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_worker_refuses_a_database_behind_its_code(tmp_path, monkeypatch) -> None:
    """A worker upgraded before `migrate` trained a whole job, then failed it storing the result (a column its code
    writes did not exist yet): it now exits at start naming the schema; an unreachable database is waited for."""
    from alembic import command

    from app.admin import alembic_config, migrate
    from app.db import make_migration_engine
    from app.settings import Settings
    from worker.cli import schema_behind

    url = f"sqlite:///{tmp_path / 'w.sqlite3'}"
    migrate(url)
    assert schema_behind(Settings(database_url=url, data_dir=tmp_path)) is None
    cfg = alembic_config()
    engine = make_migration_engine(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0009")
    engine.dispose()
    behind = schema_behind(Settings(database_url=url, data_dir=tmp_path))
    assert behind is not None and "0009" in behind, behind
    monkeypatch.setenv("NEURULES_DATABASE_URL", url)
    monkeypatch.setenv("NEURULES_DATA_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as info:
        main(["worker"])
    assert "0009" in str(info.value) and "neurules-admin migrate" in str(info.value)
    gone = Settings(database_url="postgresql+psycopg://nobody@127.0.0.1:1/none", data_dir=tmp_path)
    assert schema_behind(gone) is None


def test_set_policy_is_the_operators_and_list_tenants_shows_it(env, capsys, caplog) -> None:
    """The approval gate is set by the operator (no API key can lift it); each change is logged and dated."""
    main(["create-tenant", "acme"])
    tenant_id = capsys.readouterr().out.strip()
    main(["list-tenants"])
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["require_approval"] is False and listed["approval_policy_changed_at"] is None
    with caplog.at_level("WARNING", logger="neurules.governance"):
        main(["set-policy", "acme", "--require-approval", "on"])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0] == f"tenant {tenant_id}: require_approval off -> on" and len(out) == 2, out
    assert "predict keys now decide only through aliases" in out[1] and "before migration 0011" in out[1], out
    (logged,) = [r for r in caplog.records if r.name == "neurules.governance"]
    assert logged.getMessage() == "approval policy changed" and logged.require_approval is True  # type: ignore[attr-defined]
    assert logged.tenant_id == tenant_id and logged.before is False  # type: ignore[attr-defined]
    main(["list-tenants"])
    (listed,) = json.loads(capsys.readouterr().out)
    assert listed["require_approval"] is True and listed["approval_policy_changed_at"] is not None
    changed_at = listed["approval_policy_changed_at"]
    main(["set-policy", tenant_id, "--require-approval", "on"])  # by id; again: nothing changes, nothing logged
    assert "already: nothing changed" in capsys.readouterr().out
    main(["list-tenants"])
    assert json.loads(capsys.readouterr().out)[0]["approval_policy_changed_at"] == changed_at
    main(["set-policy", "acme", "--require-approval", "off"])
    assert capsys.readouterr().out.strip() == f"tenant {tenant_id}: require_approval on -> off"
    with pytest.raises(SystemExit, match="no tenant 'nobody'"):
        main(["set-policy", "nobody", "--require-approval", "on"])
    with pytest.raises(SystemExit):
        main(["set-policy", "acme", "--require-approval", "yes"])
    with pytest.raises(SystemExit):
        main(["set-policy", "acme"])


@pytest.mark.parametrize("argv", [["verify-audit"], ["create-key", "acme"], ["list-tenants"]])
def test_admin_commands_never_migrate_an_existing_embedded_database(env, capsys, argv) -> None:
    """An operator probe: `verify-audit` (and list-tenants, create-key, ...) migrated an existing embedded database
    to head without a word, under an older release serving on it (whose alias moves then failed with 500s). They
    now create only a new database's schema, and refuse one behind this release, changing nothing."""
    from pathlib import Path

    from alembic import command

    from app.admin import expected_schema, schema_revision_of
    from tests.app.test_migrations import _alembic

    main(["create-tenant", "acme"])  # a new database: created at head, as before
    capsys.readouterr()
    url = f"sqlite:///{Path(env) / 'var' / 'neurules.sqlite3'}"
    _alembic(url, command.downgrade, "0010")
    with pytest.raises(SystemExit) as info:
        main(argv)
    message = capsys.readouterr().err
    assert info.value.code == 2, info.value.code  # nothing checked: never verify-audit's 1 of a broken chain
    assert "older than the" in message and "neurules-admin migrate" in message, message
    assert schema_revision_of(url) == "0010"
    main(["migrate"])
    schema = expected_schema()
    assert schema is not None and schema_revision_of(url) == schema.head


def test_a_data_folder_that_is_a_file_is_named_not_a_traceback(env, monkeypatch, tmp_path) -> None:
    """An operator probe: `migrate` / `create-tenant` with NEURULES_DATA_DIR naming a file gave a FileExistsError
    traceback (serve said it in one line)."""
    afile = tmp_path / "afile"
    afile.write_text("hi")
    for data_dir in (afile, afile / "sub"):
        monkeypatch.setenv("NEURULES_DATA_DIR", str(data_dir))
        for argv in (["migrate"], ["create-tenant", "x"]):
            message = _exit_message(argv)
            assert "cannot use" in message and "NEURULES_DATA_DIR" in message, message
    assert afile.read_text() == "hi"


def test_every_command_s_own_help_says_what_it_does(capsys) -> None:
    """An operator probe found `migrate --help`, `reap --help` and `worker-alive --help` blank but for usage."""
    from worker.cli import parser

    p = parser()
    commands = next(a for a in p._actions if a.dest == "cmd").choices
    for name, command in commands.items():  # type: ignore[union-attr]
        assert command.description, name
