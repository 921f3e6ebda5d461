"""Settings fail fast on unsafe or inconsistent values."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.settings import Settings


def test_defaults_are_embedded() -> None:
    s = Settings()
    assert s.mode == "embedded" and s.run_embedded_worker and s.is_sqlite
    assert s.resolved_broker_url == "filesystem://"
    assert s.visibility_timeout_s > s.training_time_limit_s > s.training_soft_time_limit_s


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"max_upload_bytes": 0}, "MAX_UPLOAD_BYTES"),
        ({"max_upload_bytes": 10**12}, "MAX_UPLOAD_BYTES"),
        ({"training_soft_time_limit_s": 100, "training_time_limit_s": 100, "visibility_timeout_s": 200}, "SOFT_TIME"),
        ({"training_time_limit_s": 5000, "training_soft_time_limit_s": 10, "visibility_timeout_s": 4000}, "VISIBILITY"),
        ({"heartbeat_interval_s": 60, "stale_after_s": 100}, "STALE_AFTER"),
        ({"database_url": "mysql://x/y"}, "DATABASE_URL"),
        ({"mode": "distributed"}, "distributed mode needs"),
        ({"mode": "distributed", "database_url": "sqlite:///x.db", "broker_url": "redis://h"}, "server database"),
        ({"mode": "distributed", "database_url": "postgresql://h/db", "broker_url": "filesystem://"}, "network broker"),
        ({"broker_url": "memory://"}, "memory"),
        ({"port": 0}, "port"),
        ({"max_classes": 1}, "max_classes"),
        # an operator probe: a traceback at first use, a reaper thread killed by `inf`, a broker never reachable
        ({"database_url": "postgresql+psycopg://u:p@host:notaport/db"}, "NEURULES_DATABASE_URL is not a valid"),
        ({"database_url": "postgresql://::::"}, "NEURULES_DATABASE_URL is not a valid"),
        ({"broker_url": "redis://127.0.0.1:notaport/0"}, "NEURULES_BROKER_URL is not a valid"),
        ({"broker_url": "redis//nope"}, "NEURULES_BROKER_URL is not a valid"),
        ({"reaper_interval_s": "inf"}, "finite"),
        ({"stale_after_s": float("inf")}, "finite"),
        ({"drift_alert_psi": "infinity"}, "finite"),
        ({"queue": ""}, "queue"),
        ({"reaper_interval_s": 1e10}, "reaper_interval_s"),
    ],
)
def test_unsafe_values_fail_fast(kwargs: dict, text: str) -> None:
    with pytest.raises(ValidationError, match=text):
        Settings(**kwargs)


def test_env_prefix(monkeypatch) -> None:
    monkeypatch.setenv("NEURULES_MAX_CLASSES", "7")
    monkeypatch.setenv("NEURULES_MODE", "distributed")
    monkeypatch.setenv("NEURULES_DATABASE_URL", "postgresql+psycopg://u@h/db")
    monkeypatch.setenv("NEURULES_BROKER_URL", "redis://h:6379/0")
    s = Settings()
    assert s.max_classes == 7 and not s.run_embedded_worker


def test_cli_reports_bad_config(monkeypatch, capsys) -> None:
    from worker.cli import main

    monkeypatch.setenv("NEURULES_MODE", "distributed")
    with pytest.raises(SystemExit, match="invalid configuration: distributed mode needs"):
        main(["config"])


def test_cli_names_the_variable_of_a_bad_setting(monkeypatch) -> None:
    """NEURULES_MAX_EPOCHS=abc answered 'invalid configuration: Input should be a valid integer, unable to
    parse string as an integer', naming no variable; the message now says which one."""
    from worker.cli import main

    monkeypatch.setenv("NEURULES_MAX_EPOCHS", "abc")
    monkeypatch.setenv("NEURULES_MAX_CLASSES", "1")
    with pytest.raises(SystemExit) as e:
        main(["config"])
    text = str(e.value)
    assert "NEURULES_MAX_EPOCHS: Input should be a valid integer" in text, text
    assert "NEURULES_MAX_CLASSES: Input should be greater than or equal to 2" in text, text


def test_train_threads() -> None:
    assert Settings(embedded_worker=False).resolved_train_threads is None
    assert Settings().resolved_train_threads >= 1
    assert Settings(train_threads=3).resolved_train_threads == 3


def test_config_hides_the_brokers_password(monkeypatch, capsys) -> None:
    """`config` masked the database passwords and the metrics token, and printed the Redis password in clear."""
    import json

    from worker.cli import main

    monkeypatch.setenv("NEURULES_MODE", "distributed")
    monkeypatch.setenv("NEURULES_DATABASE_URL", "postgresql+psycopg://app:S3cretPW@db/n")
    monkeypatch.setenv("NEURULES_BROKER_URL", "redis://:RedisPW@redis:6379/0")
    main(["config"])
    out = capsys.readouterr().out
    assert "RedisPW" not in out and "S3cretPW" not in out
    assert json.loads(out)["broker_url"] == "redis://:***@redis:6379/0"


@pytest.mark.parametrize(
    "broker",
    [
        "sentinel://h1:26379;sentinel://h2:26379",  # Celery's failover lists and multi-host URLs stay accepted
        "amqp://u:p@h1:5672//;amqp://u:p@h2:5672//",
        "redis://h1:6379,h2:6379/0",
        "rediss://h:6380/0",
        "redis+socket:///tmp/redis.sock",
        "filesystem://",
    ],
)
def test_valid_broker_urls_are_accepted(broker: str) -> None:
    assert Settings(broker_url=broker).broker_url == broker
