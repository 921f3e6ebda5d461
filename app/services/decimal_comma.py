"""Decimal commas in the service's CSVs: `models.csvtext` reads them (the `neurules` command line uses the same
code); here its refusal becomes the service's 422 (`csv_thousands_separator`, `csv_mixed_decimal_separators`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from app.services.errors import Invalid
from models import csvtext
from models.csvtext import ColumnSeparators, rewritten


class DecimalSeparatorError(Invalid, ValueError):
    """A column whose numbers cannot be read without guessing the decimal separator."""


@contextmanager
def as_invalid() -> Iterator[None]:
    """Turn `csvtext.DecimalSeparatorError` into the service's DecimalSeparatorError (a 422 with its code)."""
    try:
        yield
    except csvtext.DecimalSeparatorError as e:
        raise DecimalSeparatorError(e.message, code=e.code) from None


def rewrites(seps: ColumnSeparators) -> bool:
    """`ColumnSeparators.rewrite`, refused as the service refuses."""
    with as_invalid():
        return seps.rewrite()


def normalise(
    columns: dict[str, list[str | None]], line_of: Callable[[int], int], keep: Callable[[str], bool] | None = None
) -> dict[str, list[str | None]]:
    """`csvtext.normalise`, refused as the service refuses."""
    with as_invalid():
        return csvtext.normalise(columns, line_of, keep)


__all__ = ["ColumnSeparators", "DecimalSeparatorError", "as_invalid", "normalise", "rewrites", "rewritten"]
