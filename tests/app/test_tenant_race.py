"""Two create-tenant commands at the same instant, with names differing only in case: one tenant, one refusal."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.services import errors, tenants

# how long the second command is given to finish while the first sits between its read and its insert: enough to
# commit on either backend unless something makes it wait for the first
SECOND_COMMAND_S = 3.0


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated database of each backend with no tenants."""
    from app.admin import migrate

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'race.sqlite3'}"
        migrate(url)
        yield url
        return
    from tests.conftest import fresh_pg_database

    url, drop = fresh_pg_database()
    migrate(url)
    yield url
    drop()


def test_case_twins_created_at_once_make_one_tenant(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.admin import create_tenant, list_tenants

    first_has_read = threading.Event()
    go_on = threading.Event()
    real = tenants.reads_alike

    def held_after_reading(name: str, known: Any) -> str | None:
        if name == "Acme":  # the first command: it has read the names; hold it before its insert
            first_has_read.set()
            go_on.wait(10)
        return real(name, known)

    monkeypatch.setattr(tenants, "reads_alike", held_after_reading)
    outcome: dict[str, Any] = {}

    def run(name: str) -> None:
        try:
            outcome[name] = create_tenant(database_url, name)
        except Exception as e:  # the assertions below name what each command met
            outcome[name] = e

    first = threading.Thread(target=run, args=("Acme",))
    first.start()
    assert first_has_read.wait(10)
    second = threading.Thread(target=run, args=("acme",))
    second.start()
    second.join(SECOND_COMMAND_S)  # without serialisation it commits here, beside the first's pending insert
    go_on.set()
    first.join(10)
    second.join(10)

    names = [t["name"] for t in list_tenants(database_url)]
    assert names == ["Acme"], f"case twins created side by side: {names} ({outcome})"
    assert isinstance(outcome["acme"], errors.Conflict) and outcome["acme"].code == "tenant_case_conflict"
    assert isinstance(outcome["Acme"], str) and outcome["Acme"].startswith("tn_")
