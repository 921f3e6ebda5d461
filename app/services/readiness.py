"""Readiness: each dependency checked on its own; ready when every configured one answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlalchemy import text

from app.db import Database

Check = Callable[[], None]  # raises when what it checks is not ready
NOT_CONFIGURED = "not configured"


def check_database(db: Database) -> None:
    """Raise when the database does not answer `SELECT 1`."""
    with db.engine.connect() as conn:
        conn.execute(text("SELECT 1"))


def run_check(check: Check | None) -> str:
    """`ok`, `not configured`, or `error: <what failed>`."""
    if check is None:
        return NOT_CONFIGURED
    try:
        check()
    except Exception as e:  # noqa: BLE001 -- any failure means not ready; the message says which
        return f"error: {type(e).__name__}: {str(e)[:200]}"
    return "ok"


def is_ready(results: Mapping[str, str]) -> bool:
    """Ready when every check answered ok or is not configured."""
    return all(v in ("ok", NOT_CONFIGURED) for v in results.values())
