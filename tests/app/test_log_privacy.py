"""What the service logs about a failed statement: never the values it carried (uploaded rows, key prefixes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def test_a_failed_statement_names_no_value(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """A lock timeout on an upload logged `[parameters: {'data': b'patient_name,ssn,...'}]` (an operator probe)."""
    from app.db import make_engine

    url = f"sqlite:///{tmp_path / 'x.sqlite3'}" if backend == "sqlite" else request.getfixturevalue("pg_database")
    engine = make_engine(url)
    try:
        with pytest.raises(DBAPIError) as failed, engine.begin() as c:
            c.execute(text("INSERT INTO no_such_table (data) VALUES (:data)"), {"data": "patient_name,ssn\nAlice,123"})
    finally:
        engine.dispose()
    assert "Alice" not in str(failed.value) and "hidden" in str(failed.value)
