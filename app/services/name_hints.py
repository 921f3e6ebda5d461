"""A hint for a field or column name the model does not know: the known name it was most likely meant to be.

Two names that print alike but differ in Unicode normalisation (`größe` composed or decomposed, as macOS file
names and some keyboards send it) answered "missing field größe" and "unknown field größe" side by side, with
nothing to tell them apart; a name differing only in case or by a typo gave no pointer either.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable


def reads_alike(name: str, known: Iterable[str]) -> str | None:
    """The first of `known` that is not `name` but reads as it: another case or Unicode normalisation form."""
    folded = unicodedata.normalize("NFC", name).casefold()
    return next((k for k in known if k != name and unicodedata.normalize("NFC", k).casefold() == folded), None)


def near_name(name: str, known: Iterable[str]) -> str | None:
    """Why `name` is not one of `known` when it nearly is (`None`: no known name is close)."""
    known = [k for k in known if k != name]
    nfc = unicodedata.normalize("NFC", name)
    for k in known:
        if unicodedata.normalize("NFC", k) == nfc:
            return f"the model's {k!r} in another Unicode normalisation form: send the name as the model spells it"
    twin = reads_alike(name, known)
    if twin is not None:
        return f"did you mean {twin!r}? (names are case-sensitive)"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
    return f"did you mean {close[0]!r}?" if close else None


MAX_HINT_PAIRS = 2_000  # (unknown, missing) name pairs compared per record or header: difflib costs ~16 us a pair


def with_hint(message: str, name: str, known: Iterable[str], *, unknown: int = 1) -> str:
    """`message`, followed by the near-name hint where there is one; none when `unknown` names against the known
    ones would be more pairs than MAX_HINT_PAIRS (a record of thousands of stray keys costs no seconds)."""
    known = list(known)
    hint = near_name(name, known) if unknown * len(known) <= MAX_HINT_PAIRS else None
    return f"{message}; {hint}" if hint else message
