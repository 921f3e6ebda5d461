"""Strict CSV parsing and profiling (pure functions, stdlib only).

The API uses it to validate and profile uploads; the worker uses the same parser to build the
training table, so both sides agree on types and on which tokens mean "missing".
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.services.errors import Invalid, TooLarge

MISSING_TOKENS = frozenset({"", "NA", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "?"})


class CSVError(Invalid, ValueError):
    """A CSV that cannot be accepted; `code` is stable, the message names the row/column."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, code=code)


class CSVTooManyRows(TooLarge, CSVError):
    """A CSV with more data rows than the configured limit."""


@dataclass(frozen=True)
class ColumnProfile:
    """Inferred type and summary of one column."""

    name: str
    type: str  # "numeric" | "categorical"
    missing: int
    distinct: int
    min: float | None = None
    max: float | None = None
    top_values: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form stored with the dataset."""
        return {
            "name": self.name,
            "type": self.type,
            "missing": self.missing,
            "distinct": self.distinct,
            "min": self.min,
            "max": self.max,
            "top_values": self.top_values,
        }


@dataclass(frozen=True)
class Table:
    """A parsed CSV: header and raw cells per column (None for missing tokens)."""

    header: list[str]
    columns: dict[str, list[str | None]]
    n_rows: int


def decode(data: bytes, line_offset: int = 0) -> str:
    """Decode UTF-8 (BOM allowed); a CSVError names the line of the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1 + line_offset
        raise CSVError(
            "csv_not_utf8",
            f"the file is not valid UTF-8: byte {e.start} (line {line}) "
            f"is {data[e.start : e.start + 1]!r}; save it as UTF-8",
        ) from None


def sniff_delimiter(text: str) -> str:
    """Comma, unless the header line has none and has semicolons or tabs."""
    first = text.split("\n", 1)[0]
    if "," in first:
        return ","
    for d in (";", "\t", "|"):
        if d in first:
            return d
    return ","


def _is_number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def parse_csv(data: bytes, *, max_rows: int = 10**9, max_columns: int = 10**6, line_offset: int = 0) -> Table:
    """Parse a CSV strictly: header required, unique non-empty names, every row the same width.

    `line_offset`: data lines that came before `data`'s first data line (a chunk of a larger file), for messages.
    """
    if not data.strip():
        raise CSVError("csv_empty", "the file is empty")
    text = decode(data, line_offset)
    delimiter = sniff_delimiter(text)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise CSVError("csv_empty", "the file is empty") from None
    except csv.Error as e:
        raise CSVError("csv_malformed", f"line 1: {e}") from None
    header = [h.strip() for h in header]
    if len(header) > max_columns:
        raise CSVError("csv_too_many_columns", f"the file has {len(header)} columns; at most {max_columns} allowed")
    empty = [i + 1 for i, h in enumerate(header) if h == ""]
    if empty and len(header) > 1:
        raise CSVError("csv_empty_column_name", f"header: column {empty[0]} has no name")
    if all(_is_number(h) for h in header):
        raise CSVError(
            "csv_no_header",
            "the first line looks like data (all values are numbers), not a header "
            "with column names; add a header line",
        )
    seen: dict[str, int] = {}
    dups = []
    for h in header:
        seen[h] = seen.get(h, 0) + 1
        if seen[h] == 2:
            dups.append(h)
    if dups:
        raise CSVError("csv_duplicate_columns", f"duplicate column name(s) in the header: {', '.join(map(repr, dups))}")
    width = len(header)
    cols: list[list[str | None]] = [[] for _ in header]
    n = 0
    try:
        for row in reader:
            if not row:
                continue  # blank line
            if len(row) != width:
                raise CSVError(
                    "csv_ragged_rows",
                    f"line {reader.line_num + line_offset}: {len(row)} fields, but the header has {width} columns",
                )
            n += 1
            if n > max_rows:
                raise CSVTooManyRows("csv_too_many_rows", f"the file has more than {max_rows} data rows")
            for j, cell in enumerate(row):
                c = cell.strip()
                cols[j].append(None if c in MISSING_TOKENS else c)
    except csv.Error as e:
        raise CSVError("csv_malformed", f"line {reader.line_num + line_offset}: {e}") from None
    if n == 0:
        raise CSVError("csv_no_rows", "the file has a header but no data rows")
    return Table(header=header, columns=dict(zip(header, cols, strict=True)), n_rows=n)


def to_float(cell: str) -> float | None:
    """Parse a numeric cell; None when it is not a finite-or-infinite number."""
    try:
        return float(cell)
    except ValueError:
        return None


def profile_column(name: str, cells: list[str | None]) -> ColumnProfile:
    """Infer numeric vs categorical and count missing/distinct values."""
    present = [c for c in cells if c is not None]
    missing = len(cells) - len(present)
    distinct_values = set(present)
    nums = [to_float(c) for c in distinct_values]
    if present and all(v is not None and not math.isnan(v) for v in nums):
        finite = [v for v in nums if v is not None]
        if any(math.isinf(v) for v in finite):
            row = next(i for i, c in enumerate(cells) if c is not None and math.isinf(to_float(c) or 0.0))
            raise CSVError(
                "csv_non_finite",
                f"column {name!r}: data row {row + 1} has {cells[row]!r}, which is not a "
                "finite number; use an empty cell or NA for a missing value",
            )
        return ColumnProfile(name, "numeric", missing, len(distinct_values), min(finite), max(finite))
    counts: dict[str, int] = {}
    for c in present:
        counts[c] = counts.get(c, 0) + 1
    top = sorted(counts, key=lambda k: (-counts[k], k))[:10]
    return ColumnProfile(name, "categorical", missing, len(distinct_values), top_values=top)


def profile(table: Table) -> list[ColumnProfile]:
    """Profile every column; an all-missing column is rejected (it carries no information)."""
    out = [profile_column(name, table.columns[name]) for name in table.header]
    empty = [p.name for p in out if p.missing == table.n_rows]
    if empty:
        raise CSVError(
            "csv_all_missing_column",
            f"column(s) with no values at all (every row missing): "
            f"{', '.join(map(repr, empty))}; drop them or fill them in",
        )
    return out


def sha256(data: bytes) -> str:
    """Hex SHA-256 of the raw bytes."""
    return hashlib.sha256(data).hexdigest()


def write_csv(header: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """Render rows as CSV text."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()
