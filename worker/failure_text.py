"""What a failed job or evaluation tells its user about an unexpected error (its `error` field)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError


def failure_text(what: str, e: BaseException) -> str:
    """`<what> failed: <type>: <message>`, but a database error without its text: that is the statement and its
    parameters (other tenants' values among them), which belong in the worker's log, not in an API answer."""
    if isinstance(e, DBAPIError):
        return f"{what} failed: a database error ({type(e.orig).__name__}); the worker's log has the details"
    return f"{what} failed: {type(e).__name__}: {e}"[:2000]
