"""The audit COPY text built in bulk equals what psycopg's `write_row` sends, and round-trips on PostgreSQL."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from psycopg._copy_base import TextFormatter
from psycopg.adapt import Transformer
from sqlalchemy import text

from app.db import make_engine
from app.services import audit

TRICKY = ["plain", "tab\there", "new\nline", "cr\rlf", "back\\slash", "%s %d %%", "ünï", "\b\v\f", "", "a" * 3000]


def psycopg_rows(columns: list[list[Any]], tx: Transformer) -> bytes:
    """The rows as psycopg's own COPY formatter writes them, row by row."""
    f = TextFormatter(tx)
    out = b"".join(bytes(f.write_row(row)) for row in zip(*columns, strict=True))
    return out + bytes(f.end())


def random_columns(n: int, seed: int) -> list[list[Any]]:
    """Columns of every kind the audit COPY meets: shared and distinct strings, ints, bools, None, times."""
    rng = random.Random(seed)
    t0 = datetime(2026, 11, 26, 9, 0, 1, 250000, tzinfo=UTC)
    shared = [rng.choice(TRICKY) for _ in range(4)]
    return [
        [t0] * n,  # one object
        [rng.choice([t0, t0 + timedelta(microseconds=3), datetime(2026, 1, 2)]) for _ in range(n)],
        ["tn_a"] * n,
        [f"{rng.getrandbits(256):064x}" for _ in range(n)],  # distinct, nothing to escape
        [rng.choice(TRICKY) + str(i) for i in range(n)],  # distinct, some escaped
        [rng.choice(shared) for _ in range(n)],
        list(range(10**12, 10**12 + n)),
        [rng.choice([True, False, None]) for _ in range(n)],
        [rng.choice([1, True, 0, False]) for _ in range(n)],  # equal but not alike: 1 and True differ in COPY
        [rng.choice(['{"p": "x\\ty"}', '{"a": 1}']) for _ in range(n)],
    ]


@pytest.mark.parametrize("n", [1, 7, audit.COPY_BLOCK_ROWS + 3])
def test_copy_text_equals_psycopg_write_row(n: int) -> None:
    tx = Transformer.from_context(None)
    columns = random_columns(n, seed=n)
    assert b"".join(audit.copy_text(columns, tx)) == psycopg_rows(columns, tx)


@pytest.mark.parametrize("n", [1, 5])
def test_copy_text_of_constant_columns(n: int) -> None:
    tx = Transformer.from_context(None)
    columns = [["a%b\tc"] * n, [7] * n, [None] * n]
    assert b"".join(audit.copy_text(columns, tx)) == psycopg_rows(columns, tx)


@pytest.mark.integration
def test_copied_rows_read_back_as_written(pg_database: str) -> None:
    """Strings with every escaped character, through `insert_columns` (COPY from 1,000 rows), read back equal."""
    engine = make_engine(pg_database)
    n = audit.COPY_MIN_ROWS + 5
    rng = random.Random(3)
    tenant = f"copy_{rng.getrandbits(32):x}"
    key_ids = [rng.choice(TRICKY)[:40] for _ in range(n)]
    t0 = datetime(2026, 11, 26, 9, 0, 1, 250000, tzinfo=UTC)
    columns: dict[str, list[Any]] = {
        "created_at": [t0] * n,
        "tenant_id": [tenant] * n,
        "api_key_id": key_ids,
        "model_version_id": ["mv\\1"] * n,
        "input_digest": [f"{i:064x}" for i in range(n)],
        "output": [{"prediction": "a\tb", "probabilities": {"a\\b": 0.5}}] * n,
        "rule_id": [i % 4 for i in range(n)],
        "seq": list(range(1, n + 1)),
        "prev_hash": ["0" * 64] * n,
        "row_hash": [f"{i:064x}" for i in range(n)],
        "missing_filled": [i % 2 == 0 for i in range(n)],
    }
    try:
        with engine.begin() as c:
            audit.insert_columns(c, columns)
        with engine.connect() as c:
            got = c.execute(
                text(
                    "SELECT api_key_id, model_version_id, output, rule_id, seq, missing_filled, created_at "
                    "FROM audit_log WHERE tenant_id = :t ORDER BY seq"
                ),
                {"t": tenant},
            ).all()
    finally:
        engine.dispose()
    assert [r.api_key_id for r in got] == key_ids
    assert {r.model_version_id for r in got} == {"mv\\1"}
    assert got[0].output == {"prediction": "a\tb", "probabilities": {"a\\b": 0.5}}
    assert [r.rule_id for r in got] == columns["rule_id"] and [r.seq for r in got] == columns["seq"]
    assert [r.missing_filled for r in got] == columns["missing_filled"]
    assert got[0].created_at.replace(tzinfo=UTC) == t0


def test_copy_text_refuses_nul_as_psycopg_does() -> None:
    import psycopg

    tx = Transformer()
    with pytest.raises(psycopg.DataError):
        psycopg_rows([["a\x00", "b"], [1, 2]], tx)
    with pytest.raises(psycopg.DataError):
        b"".join(audit.copy_text([["a\x00", "b"], [1, 2]], tx))
