"""The audit writer's WAL checkpoints run off its commits, and its connection goes back to the pool as it came."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from app.admin import migrate
from app.db import make_engine
from app.services import audit, wal_checkpoint
from app.services.audit_chain import BODY_COLUMNS, START, canonical_bodies, canonical_body, link_columns, row_hash


def _rows(i: int) -> list[dict[str, Any]]:
    return [
        {
            "created_at": datetime.now(UTC),
            "tenant_id": "tn_ckpt",
            "api_key_id": "key_1",
            "model_version_id": "mv_1",
            "input_digest": f"{i:064x}",
            "output": {"prediction": 1, "probabilities": {"0": 0.25, "1": 0.75}},
            "rule_id": 2,
            "missing_filled": False,
        }
    ]


def test_commits_are_checkpointed_by_the_thread_not_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    migrate(url)
    engine = make_engine(url)
    monkeypatch.setattr(wal_checkpoint, "CHECKPOINT_DELAY_S", 0.01)
    runs: list[float] = []
    checkpoint = wal_checkpoint.Checkpointer.checkpoint
    monkeypatch.setattr(wal_checkpoint.Checkpointer, "checkpoint", lambda self: (runs.append(1), checkpoint(self)))
    writer = audit.AuditWriter(engine)

    async def write() -> None:
        for i in range(20):
            await writer.write(_rows(i))

    asyncio.run(write())
    assert writer._conn is not None
    raw = writer._conn.connection.dbapi_connection
    assert raw is not None
    assert raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == wal_checkpoint.BACKSTOP_PAGES
    deadline = time.monotonic() + 5
    while not runs and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runs
    writer.close()
    assert raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 1000  # SQLite's default, back in the pool
    with engine.connect() as c:
        assert c.exec_driver_sql("SELECT count(*) FROM audit_log").scalar_one() == 20
    engine.dispose()


def test_in_memory_sqlite_has_no_checkpointer() -> None:
    assert not wal_checkpoint.uses_wal_file(make_engine("sqlite://"))


def test_one_row_link_is_the_canonical_one() -> None:
    row = _rows(7)[0]
    links = link_columns({k: [row[k]] for k in BODY_COLUMNS}, 1, START)
    assert canonical_bodies({k: [row[k]] for k in BODY_COLUMNS}, 1) == [canonical_body(row)]
    assert links.row_hash == [row_hash(1, START.row_hash, canonical_body(row))]
