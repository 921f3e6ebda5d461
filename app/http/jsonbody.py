"""JSON on the hot path: orjson, with the standard library as the fallback for what orjson refuses."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson


def json_bytes(payload: Any) -> bytes:
    """Compact JSON of `payload`; an int beyond 64 bits (a record may echo one) goes through `json`."""
    try:
        return orjson.dumps(payload, default=str)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), default=str).encode()


_KEY_END = re.compile(rb'"[ \t\n\r]*:')  # every key of a JSON text ends so (and some strings hold it)


def _n_keys(obj: Any) -> int:
    """The keys of every object inside a parsed JSON value (the parsers make plain dicts and lists)."""
    n = 0
    if obj.__class__ is dict:
        n = len(obj)
        obj = obj.values()
    for v in obj:
        if v.__class__ is dict or v.__class__ is list:
            n += _n_keys(v)
    return n


class _Object(dict[str, Any]):
    """A parsed object that remembers the first key its text gave twice."""

    repeated: str | None = None


def _object(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object()
    for k, v in pairs:
        if k in out and out.repeated is None:
            out.repeated = k
        out[k] = v
    return out


def _repeated_path(obj: Any, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    if isinstance(obj, _Object) and obj.repeated is not None:
        return (*path, obj.repeated)
    items: Any = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for k, v in items:
        found = _repeated_path(v, (*path, k))
        if found is not None:
            return found
    return None


def repeated_key(raw: bytes, parsed: Any) -> tuple[str | int, ...] | None:
    """The path (keys and indexes, the repeated key last) of the first key an object of the JSON text `raw` gives
    twice, else None; `parsed` is what a parser made of it (keeping the last of each key, as they all do).

    Cheap when no key repeats: a parsed value with as many keys as the text has `"...":` endings has lost none;
    otherwise (a repeated key, or a string value holding `":`) the text is parsed again, keeping the pairs.
    """
    spaced = b" :" in raw or b"\t:" in raw or b"\n:" in raw or b"\r:" in raw
    endings = len(_KEY_END.findall(raw)) if spaced else raw.count(b'":')  # the same count: bytes.count is faster
    if endings == (_n_keys(parsed) if parsed.__class__ in (dict, list) else 0):
        return None
    try:
        return _repeated_path(json.loads(raw, object_pairs_hook=_object), ())
    except ValueError:  # not the text `parsed` came from: nothing to add to the parser's own errors
        return None


def repeated_key_error(path: tuple[str | int, ...]) -> dict[str, Any]:
    """The validation error (`loc` in the body) for a key given twice."""
    return {
        "type": "repeated_key",
        "loc": ("body", *path),
        "msg": f"the key {path[-1]!r} is given more than once in its object; give it once (no value silently wins)",
        "input": None,
    }
