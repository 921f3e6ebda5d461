"""Reading audit rows as stored, including rows changed outside the service (a row that does not decode).

SQLite keeps whatever a column was given: a row edited with the sqlite3 shell can hold text that is not JSON
in `output`, or a `created_at` that is no time. SQLAlchemy's typed result processing raises on such a row, so
one tampered row made the chain verification and every page of the audit trail holding it a 500. Here the
JSON and time columns are selected as stored (PostgreSQL's driver still decodes them: that database keeps
its types) and decoded row by row; a row that does not decode is kept, with what is wrong in `unreadable`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Dialect, Integer, String, Text, cast, type_coerce
from sqlalchemy.sql.elements import ColumnElement

from app.tables import AuditRecord

_TABLE = AuditRecord.__table__
_WHOLE = ("id", "seq", "rule_id")
_TEXT = ("tenant_id", "api_key_id", "model_version_id", "input_digest", "prev_hash", "row_hash")


def _as_stored(c: Any) -> ColumnElement[Any]:
    """A column as stored: `output` as its text (a JSON object repeating a key reads one way in Python, another in
    SQL; PostgreSQL's driver would decode it), `created_at` untyped, `missing_filled` without the Boolean's
    reading (which takes any truthy value, 'no' or 2, for true); the others typed."""
    if c.name == "output":
        return cast(c, Text).label(c.name)
    if c.name == "created_at":
        return type_coerce(c, String).label(c.name)
    if c.name == "missing_filled":
        return type_coerce(c, Integer).label(c.name)
    return c  # type: ignore[no-any-return]


COLUMNS: list[ColumnElement[Any]] = [_as_stored(c) for c in _TABLE.columns]


class _RepeatedKey(ValueError):
    """A JSON object names a key twice."""


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """`json.loads`'s object_pairs_hook refusing an object that names a key twice (ValueError)."""
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise _RepeatedKey(next(k for k in keys if keys.count(k) > 1))
    return dict(pairs)


def _flag(value: Any) -> bool | str | None:
    """A stored `missing_filled` as a bool (None: not recorded), or what is wrong with it."""
    if value is None or isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    return f"missing_filled is not a boolean ({value!r:.40})"


def _decoded(row: dict[str, Any], parse_time: Callable[[Any], Any] | None) -> list[tuple[str, str]]:
    """Decode `created_at` and `output` in place; (column, what is wrong) for each value not of its kind."""
    out = []
    if isinstance(row["output"], str):
        try:
            row["output"] = json.loads(row["output"], object_pairs_hook=unique_keys)
        except _RepeatedKey as e:
            out.append(("output", f"output names the key {str(e)[:40]!r} twice"))
        except ValueError:
            out.append(("output", f"output is not JSON ({row['output'][:40]!r})"))
    flag = _flag(row.get("missing_filled"))
    if isinstance(flag, str):
        out.append(("missing_filled", flag))
    else:
        row["missing_filled"] = flag
    time_problem = parse_stored_time(row, "created_at", parse_time)
    if time_problem is not None:
        out.append(("created_at", time_problem))
    bad = {name for name, _ in out}
    if "output" not in bad and not isinstance(row["output"], dict):
        out.append(("output", "output is not a JSON object"))
    if "created_at" not in bad and not isinstance(row["created_at"], datetime):
        out.append(("created_at", "created_at is not a time"))
    out += [(name, f"{name} is not a whole number") for name in _WHOLE if not is_whole(row[name])]
    out += [(name, f"{name} is not text") for name in _TEXT if not isinstance(row[name], str)]
    return out


def parse_stored_time(row: dict[str, Any], name: str, parse_time: Callable[[Any], Any] | None) -> str | None:
    """Parse `row[name]`, selected as stored text (`time_parser`), in place; what is wrong when it is no time."""
    if isinstance(row[name], str) and parse_time is not None:
        try:
            row[name] = parse_time(row[name])
        except (ValueError, TypeError, AttributeError):
            return f"{name} is not a time ({row[name][:40]!r})"
    return None


def is_whole(value: Any) -> bool:
    """Whether a stored value is a whole number (an int, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def time_parser(dialect: Dialect) -> Callable[[Any], Any] | None:
    """How the dialect reads a stored `created_at` (None: its driver gives a datetime)."""
    return _TABLE.c.created_at.type.dialect_impl(dialect).result_processor(dialect, None)


def decode(mapping: Any, parse_time: Callable[[Any], Any] | None) -> dict[str, Any]:
    """A row selected with COLUMNS as a dict of the table's columns, plus `unreadable`: None, or what could
    not be read (those values are None); `parse_time` from `time_parser`."""
    row = dict(mapping)
    problems = _decoded(row, parse_time)
    for name, _ in problems:
        row[name] = None
    row["unreadable"] = "; ".join(why for _, why in problems) or None
    return row


__all__ = ["COLUMNS", "decode", "is_whole", "parse_stored_time", "time_parser"]
