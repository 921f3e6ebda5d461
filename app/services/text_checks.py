"""Checks of names people give (tenants, datasets): characters that would hide or garble what a name shows."""

from __future__ import annotations

import unicodedata

from app.services.errors import Invalid

# control, format (invisible: zero-width, bidi overrides), surrogate (undecodable bytes), line/paragraph separators
UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unprintable_character(text: str) -> str | None:
    """The first control or invisible character of `text` as `U+XXXX`, None when it has none."""
    bad = next((ch for ch in text if unicodedata.category(ch) in UNPRINTABLE_CATEGORIES), None)
    return None if bad is None else f"U+{ord(bad):04X}"


def check_printable(field: str, text: str, code: str | None = None) -> None:
    """Invalid naming `field` when `text` holds a control or invisible character (`unprintable_character`)."""
    bad = unprintable_character(text)
    if bad is not None:
        raise Invalid.field(field, f"must not contain control or invisible characters (found {bad})", code=code)
