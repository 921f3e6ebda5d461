"""docker-compose.yml and Dockerfile, checked without a Docker engine."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


# what an operator's .env gives the variables compose requires (`${VAR:?message}`)
OPERATOR_ENV = {"POSTGRES_PASSWORD": "owner-pw", "NEURULES_APP_PASSWORD": "app-pw", "NEURULES_METRICS_TOKEN": "m" * 24}
REQUIRED = re.compile(r"\$\{(\w+):\?[^}]*\}")
DEFAULTED = re.compile(r"\$\{(\w+):-([^}]*)\}")


def _env(service: dict) -> dict[str, str]:
    out = {}
    for k, v in service["environment"].items():
        text = REQUIRED.sub(lambda m: OPERATOR_ENV[m.group(1)], str(v))
        out[k] = DEFAULTED.sub(lambda m: m.group(2), text)
    return out


def test_secrets_have_no_shipped_default() -> None:
    """The compose file gave the database roles the passwords `neurules` / `neurules_app` and left /metrics (every
    tenant's model names and decision counts, on a published port) open when no token was set: compose now refuses
    to start without the three (`${VAR:?...}`), and nothing else in it names a default for them."""
    text = (ROOT / "docker-compose.yml").read_text()
    assert set(REQUIRED.findall(text)) == set(OPERATOR_ENV)
    assert not [m for m in DEFAULTED.findall(text) if m[0] in OPERATOR_ENV]
    api = _settings(_env(compose()["services"]["api"]))
    assert api.metrics_token is not None and api.metrics_token.get_secret_value() == "m" * 24


def _settings(env: dict[str, str]) -> Settings:
    return Settings(**{k.removeprefix("NEURULES_").lower(): v for k, v in env.items()})


def test_services_and_dependencies() -> None:
    c = compose()
    s = c["services"]
    assert {"api", "worker", "postgres", "redis", "migrate"} <= set(s)
    assert s["api"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert s["worker"]["depends_on"]["redis"]["condition"] == "service_healthy"
    assert s["api"]["ports"] == ["8000:8000"]
    for name in ("postgres", "redis", "api"):
        assert "healthcheck" in s[name]


def test_worker_reserves_a_gpu_and_runs_the_solo_worker() -> None:
    w = compose()["services"]["worker"]
    dev = w["deploy"]["resources"]["reservations"]["devices"][0]
    assert dev["driver"] == "nvidia" and "gpu" in dev["capabilities"]
    assert w["command"] == ["neurules-admin", "worker"]
    assert w["healthcheck"]["test"] == ["CMD", "neurules-admin", "worker-alive"]  # not the image's HTTP check
    assert compose()["services"]["migrate"]["healthcheck"] == {"disable": True}


def test_environment_passes_the_fail_fast_settings() -> None:
    s = compose()["services"]
    api, worker, migrate = (_env(s[n]) for n in ("api", "worker", "migrate"))
    assert api == worker and {k: v for k, v in migrate.items() if k != "NEURULES_MIGRATION_DATABASE_URL"} == api
    settings = _settings(api)
    assert settings.mode == "distributed" and not settings.run_embedded_worker
    assert settings.visibility_timeout_s > settings.training_time_limit_s


def test_two_database_roles() -> None:
    """The service connects as the app role; only the migrate service has the owner's URL and sets the role up."""
    s = compose()["services"]
    owner = s["postgres"]["environment"]["POSTGRES_USER"]
    api, migrate = _settings(_env(s["api"])), _settings(_env(s["migrate"]))
    assert api.app_role is None and api.migration_database_url is None  # no owner credentials in the service
    assert migrate.app_role == "neurules_app" != owner
    assert migrate.resolved_migration_database_url.startswith(f"postgresql+psycopg://{owner}:")
    assert migrate.resolved_database_url == api.resolved_database_url
    assert s["migrate"]["command"] == ["sh", "-c", "neurules-admin create-app-role && neurules-admin migrate"]
    assert "--no-migrate" in s["api"]["command"] and s["worker"]["command"] == ["neurules-admin", "worker"]


def test_dockerfile() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert text.startswith("#") and "FROM python:3.11" in text
    assert '"neurules-admin", "serve"' in text and "USER neurules" in text and "HEALTHCHECK" in text
    for path in ("models", "app", "worker", "migrations", "alembic.ini"):
        assert f"COPY {path}" in text
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and "var" in ignored


def test_console_scripts_resolve() -> None:
    import importlib
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["neurules-admin"] == "worker.cli:main"  # the admin CLI needs both app and worker
    for target in scripts.values():
        module, _, attr = target.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), target
