"""How a CSV is written, as both the service and the `neurules` command line read it: the separator (`,`, `;`,
tab or `|`, from the header line) and decimal commas (`3,5`) in files separated otherwise than by commas.

Decimal commas: a column whose cells are all numbers, some written with a decimal comma and none with a decimal
point, is rewritten with points (`3,5` -> `3.5`), so the profile, training and predictions type it as numeric.
A column that mixes both separators, or writes thousands separators (`1.234,5`), cannot be read without
guessing and is refused (`DecimalSeparatorError`). Comma-separated files are left alone (a quoted `"3,5"` there
is text).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

SEPARATORS = (",", ";", "\t", "|")
BOM = b"\xef\xbb\xbf"


class NotUtf8(ValueError):
    """The file is not UTF-8 text; the message names the first bad byte and its line."""


def utf8_text(data: bytes, line_offset: int = 0) -> str:
    """The bytes as UTF-8 text (a byte-order mark dropped); NotUtf8 naming the first bad byte's place in `data` and
    its line (`line_offset`: lines before `data`)."""
    bom = 3 if data[:3] == BOM else 0  # utf-8-sig would count a bad byte's place from after the mark
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as e:
        at = e.start + bom
        raise not_utf8(at, data[:at].count(b"\n") + 1 + line_offset, data[at : at + 1]) from None


def not_utf8(at: int, line: int, byte: bytes) -> NotUtf8:
    """The error for a bad byte at place `at` of a file, on `line` (the one-shot and the streaming reader's)."""
    return NotUtf8(f"the file is not valid UTF-8: byte {at} (line {line}) is {byte!r}; save it as UTF-8")


def header_problem(header: list[str]) -> tuple[str, str] | None:
    """(code, message) of what is wrong with a header line (its names stripped), else None: an empty line, a
    column with no name, numbers only (a data line), a name twice, or two names printing alike (the same text in
    two Unicode normalisation forms: columns a reader of the rules cannot tell apart)."""
    if not header:
        return "csv_no_header", "line 1 is empty: the column names must be the first line; remove the blank lines"
    empty = [i + 1 for i, h in enumerate(header) if h == ""]
    if empty and len(header) > 1:
        return "csv_empty_column_name", f"header: column {empty[0]} has no name"
    if all(is_number(h) for h in header):
        return "csv_no_header", (
            "the first line looks like data (all values are numbers), not a header with column names; add a header line"
        )
    counts: dict[str, int] = {}
    dups = []
    for h in header:
        counts[h] = counts.get(h, 0) + 1
        if counts[h] == 2:
            dups.append(h)
    if dups:
        return "csv_duplicate_columns", f"duplicate column name(s) in the header: {', '.join(map(repr, dups))}"
    seen: dict[str, str] = {}
    for h in header:
        other = seen.setdefault(unicodedata.normalize("NFC", h), h)
        if other != h:
            return "csv_duplicate_columns", (
                f"columns {other!r} and {h!r} print alike (the same text in two Unicode normalisation forms); "
                "rename one"
            )
    return None


class SeparatorCount:
    """The separators of a header line counted outside quotes, the line given in one piece or several."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(SEPARATORS, 0)
        self.quoted = False

    def feed(self, piece: str) -> None:
        """Count one more piece of the line (text between quotes is a name's, not the file's)."""
        for i, part in enumerate(piece.split('"')):
            if i:
                self.quoted = not self.quoted  # a doubled quote inside a quoted name flips twice: still inside
            if not self.quoted:
                for d in SEPARATORS:
                    self.counts[d] += part.count(d)

    def separator(self) -> str:
        """The separator used most; comma when the line has none.

        A tie between the comma and another goes to the other: a `;`/tab file saved by a spreadsheet leaves a
        comma in a name unquoted (`Gewicht, kg;Klasse`), while a comma file rarely holds a bare `;` or tab in
        a name."""
        best = max(SEPARATORS[1:], key=lambda d: self.counts[d])
        return best if self.counts[best] and self.counts[best] >= self.counts[","] else ","


def sniff_delimiter(text: str) -> str:
    """The separator of a file's header line (`SeparatorCount`): `,`, `;`, tab or `|`."""
    count = SeparatorCount()
    count.feed(text.split("\n", 1)[0])
    return count.separator()


Where = tuple[int, int, str]  # a cell: its data row (from 0), the line its record starts on, its text

DECIMAL_COMMA = re.compile(r"^[+-]?(\d+,\d*|,\d+)([eE][+-]?\d+)?$")
THOUSANDS_COMMA = re.compile(r"^[+-]?\d{1,3}(\.\d{3})+,\d*$")  # 1.234,5


class DecimalSeparatorError(ValueError):
    """A column whose numbers cannot be read without guessing the decimal separator (`code` names which case)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def plain_number_text(s: str) -> bool:
    """Whether `float` may read `s` as a CSV number: ASCII without `_` (`float` also takes `3_2` as 32 and
    other scripts' digits, which no spreadsheet or CSV reader takes for a number)."""
    return s.isascii() and "_" not in s


def number(cell: str) -> float | None:
    """A cell's number as a CSV holds one (`plain_number_text`, then `float`: `inf` and `nan` too), else None."""
    if not plain_number_text(cell):
        return None
    try:
        return float(cell)
    except ValueError:
        return None


def is_number(cell: str) -> bool:
    """Whether a cell is a number as a CSV holds one (`plain_number_text`, then `float`)."""
    return number(cell) is not None


@dataclass
class ColumnSeparators:
    """What decides a column's decimal separator, gathered over its cells chunk by chunk (rows from 0 in the file)."""

    name: str
    comma: bool = False  # a cell holds a ','
    text: bool = False  # a cell is not a number
    thousands: Where | None = None  # the first cell with a thousands separator
    decimal_comma: Where | None = None
    point: Where | None = None

    def add(self, cells: list[str | None], first_row: int, line_of: Callable[[int], int]) -> None:
        """Take the next cells of the column; `first_row`: the file's data row index (from 0) of the first,
        `line_of`: the file line the r-th of these cells' records starts on."""
        for r, c in enumerate(cells):
            if c is None:
                continue
            if "," not in c:  # a number only if float reads it (both patterns need a comma)
                if not self.text and not is_number(c):
                    self.text = True
                elif not self.text and self.point is None and "." in c:
                    self.point = (first_row + r, line_of(r), c)
                continue
            self.comma = True
            if not self.text:
                self._add_comma((first_row + r, line_of(r), c))

    def _add_comma(self, cell: Where) -> None:
        """A cell with a comma: a decimal comma, a thousands separator, or text (float reads no comma)."""
        c = cell[2]
        thousands = THOUSANDS_COMMA.match(c)
        decimal = DECIMAL_COMMA.match(c)
        if not thousands and not decimal:
            self.text = True
            return
        if thousands and self.thousands is None:
            self.thousands = cell
        if decimal and self.decimal_comma is None:
            self.decimal_comma = cell
        if self.point is None and "." in c and not thousands:
            self.point = cell

    def rewrite(self) -> bool:
        """Whether the column's commas are decimal commas (read as points); DecimalSeparatorError when unreadable."""
        if not self.comma or self.text:
            return False
        if self.thousands is not None:
            row, line, cell = self.thousands
            raise DecimalSeparatorError(
                f"column {self.name!r}: row {row} (line {line}) has {cell!r} with a thousands separator; "
                "remove the '.' thousands separators (decimal commas are fine)",
                code="csv_thousands_separator",
            )
        if self.decimal_comma is not None and self.point is not None:
            (comma, c_line, c_cell), (point, p_line, p_cell) = self.decimal_comma, self.point
            raise DecimalSeparatorError(
                f"column {self.name!r} mixes decimal commas (row {comma}, line {c_line}: {c_cell!r}) and decimal "
                f"points (row {point}, line {p_line}: {p_cell!r}); write every number of a column the same way",
                code="csv_mixed_decimal_separators",
            )
        return True


def rewritten(cells: list[str | None]) -> list[str | None]:
    """The cells with their commas read as decimal points."""
    return [None if c is None else c.replace(",", ".") for c in cells]


def normalise_column(name: str, cells: list[str | None], line_of: Callable[[int], int]) -> list[str | None]:
    """The column with decimal commas turned into points; unchanged when it has none or holds text
    (`line_of`: the file line row r starts on, for the messages)."""
    seps = ColumnSeparators(name)
    seps.add(cells, 0, line_of)
    return rewritten(cells) if seps.rewrite() else cells


def normalise(
    columns: dict[str, list[str | None]], line_of: Callable[[int], int], keep: Callable[[str], bool] | None = None
) -> dict[str, list[str | None]]:
    """Every column of a `;`/tab/`|`-separated table with its decimal commas read (see the module doc), but
    those `keep` names (a model's categorical features: `1,5` there is a level, not a number)."""
    return {
        name: cells if keep is not None and keep(name) else normalise_column(name, cells, line_of)
        for name, cells in columns.items()
    }
