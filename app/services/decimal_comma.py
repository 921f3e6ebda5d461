"""Decimal commas (`3,5`) in files separated by `;`, tab or `|`: read as numbers, or refused with how to fix.

A column whose cells are all numbers, some written with a decimal comma and none with a decimal point,
is rewritten with points (`3,5` -> `3.5`), so the profile, training and predictions type it as numeric.
A column that mixes both separators, or writes thousands separators (`1.234,5`), cannot be read without
guessing and is refused. Comma-separated files are left alone (a quoted `"3,5"` there is text).
"""

from __future__ import annotations

import re

from app.services.errors import Invalid

DECIMAL_COMMA = re.compile(r"^[+-]?(\d+,\d*|,\d+)([eE][+-]?\d+)?$")
THOUSANDS_COMMA = re.compile(r"^[+-]?\d{1,3}(\.\d{3})+,\d*$")  # 1.234,5


class DecimalSeparatorError(Invalid, ValueError):
    """A column whose numbers cannot be read without guessing the decimal separator."""


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return bool(DECIMAL_COMMA.match(cell) or THOUSANDS_COMMA.match(cell))
    return True


def _first(cells: list[str | None], test: re.Pattern[str] | None = None, point: bool = False) -> int | None:
    for i, c in enumerate(cells):
        if c is None:
            continue
        if (test is not None and test.match(c)) or (point and "." in c and not THOUSANDS_COMMA.match(c)):
            return i
    return None


def normalise_column(name: str, cells: list[str | None]) -> list[str | None]:
    """The column with decimal commas turned into points; unchanged when it has none or holds text."""
    if not any(c is not None and "," in c for c in cells):
        return cells
    if any(c is not None and not _is_number(c) for c in cells):
        return cells  # text besides the numbers: a categorical column, kept as written
    thousands = _first(cells, THOUSANDS_COMMA)
    if thousands is not None:
        raise DecimalSeparatorError(
            f"column {name!r}: data row {thousands + 1} has {cells[thousands]!r} with a thousands separator; "
            "remove the '.' thousands separators (decimal commas are fine)",
            code="csv_thousands_separator",
        )
    comma = _first(cells, DECIMAL_COMMA)
    point = _first(cells, point=True)
    if comma is not None and point is not None:
        raise DecimalSeparatorError(
            f"column {name!r} mixes decimal commas (data row {comma + 1}: {cells[comma]!r}) and decimal points "
            f"(data row {point + 1}: {cells[point]!r}); write every number of a column the same way",
            code="csv_mixed_decimal_separators",
        )
    return [None if c is None else c.replace(",", ".") for c in cells]


def normalise(columns: dict[str, list[str | None]]) -> dict[str, list[str | None]]:
    """Every column of a `;`/tab/`|`-separated table with its decimal commas read (see the module doc)."""
    return {name: normalise_column(name, cells) for name, cells in columns.items()}
