"""Strict CSV parsing and profiling (pure functions, stdlib only).

The API uses it to validate and profile uploads; the worker uses the same parser to build the
training table, so both sides agree on types and on which tokens mean "missing".

Messages name places one way (README, "CSV files"): `line N` is a line of the file as an editor numbers
it (the header is line 1; blank lines and the lines inside a quoted cell count); `row i` is a data record
counting from 0, as predict.csv's `index` column and `records[i]` do (blank lines are no rows). A message
about a record names both, `row i (line N)`, N being the line the record starts on.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from app.services import decimal_comma
from app.services.errors import Invalid, TooLarge
from models import csvtext
from models.csvtext import sniff_delimiter
from models.rulelist import CSV_MISSING_TOKENS, RuleList

EXACT_INTEGER_LIMIT = 2.0**53  # every integer below it in magnitude is a float exactly (a class label's number)


class CSVError(Invalid, ValueError):
    """A CSV that cannot be accepted; `code` is stable, the message names the row/column, and the one detail
    names the place as a field: `file` (the upload), `header`, or `line N` (with `line`)."""

    def __init__(self, code: str, message: str, *, field: str = "file", line: int | None = None) -> None:
        detail: dict[str, Any] = {"field": field, "message": message}
        if line is not None:
            detail["line"] = line
        super().__init__(message, code=code, details=[detail])


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
class RowLines:
    """Where a table's data rows are: row `first_row + r` of the file starts on line `line(r)`.

    Consecutive rows sit on consecutive lines; `marks` (local row, line) restart the count after a blank
    line or a record spanning several lines, so a file without either keeps one mark.
    """

    marks: tuple[tuple[int, int], ...] = ((0, 2),)
    first_row: int = 0

    def line(self, r: int) -> int:
        """The file line (header = 1) the table's row r (from 0 within the table) starts on."""
        k = bisect_right(self.marks, (r, math.inf)) - 1
        row, line = self.marks[max(k, 0)]
        return line + r - row

    def where(self, r: int) -> str:
        """`row i (line N)` for the table's row r (i counts the file's data rows from 0)."""
        return f"row {self.first_row + r} (line {self.line(r)})"


@dataclass(frozen=True)
class Table:
    """A parsed CSV: header and raw cells per column (None for missing tokens), and where its rows are."""

    header: list[str]
    columns: dict[str, list[str | None]]
    n_rows: int
    lines: RowLines = field(default_factory=RowLines)


def decode(data: bytes, line_offset: int = 0) -> str:
    """Decode UTF-8 (BOM allowed); a CSVError names the place and line of the first bad byte (`csvtext.utf8_text`)."""
    try:
        return csvtext.utf8_text(data, line_offset)
    except csvtext.NotUtf8 as e:
        raise CSVError("csv_not_utf8", str(e)) from None


def _check_nul(header: list[str], row: list[str], where: str) -> None:
    """Refuse a NUL character, naming its record (`where`) and column (no database can store it in text)."""
    for j, cell in enumerate(row):
        if "\x00" in cell:
            column = f"column {j + 1} ({header[j]!r})" if j < len(header) else f"column {j + 1}"
            raise CSVError(
                "csv_nul_byte",
                f"{where}, {column}: contains a NUL character (byte 0); remove it (is the file a text CSV? "
                "save it as UTF-8 text)",
            )


def _read_header(reader: Any, max_columns: int, has_nul: bool, unnamed_ok: bool = False) -> list[str]:
    """The header line, checked: named, unique columns, not data (`unnamed_ok`: a column with no name, as a
    trailing comma makes, is named `(unnamed column N)` instead of refused)."""
    try:
        header = next(reader)
    except StopIteration:
        raise CSVError("csv_empty", "the file is empty") from None
    except csv.Error as e:
        raise CSVError("csv_malformed", f"line 1: {e}", field="line 1", line=1) from None
    header = [h.strip() for h in header]
    if has_nul:
        _check_nul(header, header, "line 1 (the header)")
    if len(header) > max_columns:
        raise CSVError(
            "csv_too_many_columns", f"the file has {len(header)} columns; at most {max_columns} allowed", field="header"
        )
    if unnamed_ok and len(header) > 1:
        header = [h or f"(unnamed column {i + 1})" for i, h in enumerate(header)]
    problem = csvtext.header_problem(header)  # the checks `neurules fit` / `predict` make too
    if problem is not None:
        raise CSVError(problem[0], problem[1], field="header")
    return header


def _read_rows(
    reader: Any, header: list[str], max_rows: int, has_nul: bool, line_offset: int = 0, rows_before: int = 0
) -> tuple[list[list[str | None]], int, RowLines]:
    """Cells per column (None for missing tokens), the number of data rows (`rows_before` already read) and
    the line each starts on."""
    width = len(header)
    cols: list[list[str | None]] = [[] for _ in header]
    n = 0
    marks: list[tuple[int, int]] = []
    next_line = -1  # the line the next row starts on when nothing shifts it
    end = reader.line_num  # the last line read
    try:
        for row in reader:
            start, end = end + 1 + line_offset, reader.line_num
            if not row:
                continue  # blank line
            if start != next_line:
                marks.append((n, start))
            next_line = start + 1
            if has_nul:
                _check_nul(header, row, f"row {rows_before + n} (line {start})")
            if len(row) != width:
                raise CSVError(
                    "csv_ragged_rows",
                    f"row {rows_before + n} (line {start}): {len(row)} fields, but the header has {width} columns",
                )
            n += 1
            if n + rows_before > max_rows:
                raise CSVTooManyRows("csv_too_many_rows", f"the file has more than {max_rows} data rows")
            for j, cell in enumerate(row):  # `csv_cell_value`, written out: this runs once per cell of an upload
                c = cell.strip()
                cols[j].append(None if c in CSV_MISSING_TOKENS else c)
    except csv.Error as e:
        line = reader.line_num + line_offset
        raise CSVError("csv_malformed", f"line {line}: {e}", field=f"line {line}", line=line) from None
    return cols, n, RowLines(tuple(marks) or ((0, end + 1 + line_offset),), rows_before)


def parse_csv(
    data: bytes,
    *,
    max_rows: int = 10**9,
    max_columns: int = 10**6,
    line_offset: int = 0,
    keep_text: Callable[[str], bool] | None = None,
) -> Table:
    """Parse a CSV strictly: header required, unique non-empty names, every row the same width, no NUL.

    Separated by `,`, `;`, tab or `|` (`sniff_delimiter`); in a file not separated by
    commas, decimal commas are read as numbers (`decimal_comma`), except in the columns `keep_text` names.
    `line_offset`: lines of a larger file before `data`'s second line (a chunk after the header), for the
    messages.
    """
    if not data.strip():
        raise CSVError("csv_empty", "the file is empty")
    text = decode(data, line_offset)
    delimiter = sniff_delimiter(text)
    has_nul = "\x00" in text
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header = _read_header(reader, max_columns, has_nul)
    cols, n, lines = _read_rows(reader, header, max_rows, has_nul, line_offset)
    if n == 0:
        raise CSVError("csv_no_rows", "the file has a header but no data rows")
    columns = dict(zip(header, cols, strict=True))
    if delimiter != ",":
        columns = decimal_comma.normalise(columns, lines.line, keep_text)
    return Table(header=header, columns=columns, n_rows=n, lines=lines)


def read_header(text: str, delimiter: str, *, max_columns: int = 10**6, unnamed_ok: bool = False) -> list[str]:
    """The checked header of a decoded file's first record (as `parse_csv` checks it; `unnamed_ok`: `_read_header`)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    return _read_header(reader, max_columns, "\x00" in text, unnamed_ok)


def parse_rows(
    text: str, header: list[str], delimiter: str, *, max_rows: int, line_offset: int, rows_before: int
) -> Table:
    """Whole records of a larger file (decoded, after its header) as `parse_csv` reads them; decimal commas not read.

    `line_offset`: physical lines of the file before `text`; `rows_before`: data rows before it (for the row limit).
    """
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    cols, n, lines = _read_rows(reader, header, max_rows, "\x00" in text, line_offset, rows_before)
    return Table(header=header, columns=dict(zip(header, cols, strict=True)), n_rows=n, lines=lines)


def to_float(cell: str) -> float | None:
    """Parse a numeric cell; None when it is not a number as a CSV holds one (`csvtext.number`)."""
    return csvtext.number(cell)


def profile_column(name: str, cells: list[str | None], lines: RowLines | None = None) -> ColumnProfile:
    """Infer numeric vs categorical and count missing/distinct values (`lines`: where the rows are, for messages)."""
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
                f"column {name!r}: {(lines or RowLines()).where(row)} has {cells[row]!r}, which is not a "
                "finite number; use an empty cell or NA for a missing value",
            )
        # distinct numbers, as training reads a numeric target (`1`, `01` and `1.0` are one class); beyond 2**53,
        # where floats merge integers, the text (as training keeps those labels)
        pairs = zip(distinct_values, nums, strict=True)
        keys = {v if abs(v) < EXACT_INTEGER_LIMIT else c for c, v in pairs if v is not None}
        return ColumnProfile(name, "numeric", missing, len(keys), min(finite), max(finite))
    counts: dict[str, int] = {}
    for c in present:
        counts[c] = counts.get(c, 0) + 1
    top = sorted(counts, key=lambda k: (-counts[k], k))[:10]
    return ColumnProfile(name, "categorical", missing, len(distinct_values), top_values=top)


def profile(table: Table) -> list[ColumnProfile]:
    """Profile every column; an all-missing column is rejected (it carries no information)."""
    out = [profile_column(name, table.columns[name], table.lines) for name in table.header]
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


def categorical_names(rule_list: RuleList) -> Callable[[str], bool]:
    """Whether a column is a categorical feature of the rule list (read as text, commas and all)."""
    names = frozenset(f.name for f in rule_list.features if f.type == "categorical")
    return names.__contains__
