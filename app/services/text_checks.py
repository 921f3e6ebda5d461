"""Checks of names people give (tenants, datasets): characters that would hide or garble what a name shows."""

from __future__ import annotations

import unicodedata

# control, format (invisible: zero-width, bidi overrides), surrogate (undecodable bytes), line/paragraph separators
UNPRINTABLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def unprintable_character(text: str) -> str | None:
    """The first control or invisible character of `text` as `U+XXXX`, None when it has none."""
    bad = next((ch for ch in text if unicodedata.category(ch) in UNPRINTABLE_CATEGORIES), None)
    return None if bad is None else f"U+{ord(bad):04X}"
