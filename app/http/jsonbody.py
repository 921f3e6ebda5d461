"""JSON on the hot path: orjson, with the standard library as the fallback for what orjson refuses."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool


def json_bytes(payload: Any) -> bytes:
    """Compact JSON of `payload`; an int beyond 64 bits (a record may echo one) goes through `json`."""
    try:
        return orjson.dumps(payload, default=str)
    except TypeError:
        return json.dumps(payload, separators=(",", ":"), default=str).encode()


class LoneSurrogate(ValueError):
    """A string of the body (a key or a value) holds half of a UTF-16 surrogate pair: not text, cannot be stored."""

    def __init__(self, path: tuple[str | int, ...]) -> None:
        super().__init__("holds a lone UTF-16 surrogate (a \\ud800-\\udfff escape without its pair): not text")
        self.path = path

    def error(self) -> dict[str, Any]:
        """The validation error (`loc` in the body, keys with the surrogate escaped)."""
        return {"type": "invalid_text", "loc": ("body", *self.path), "msg": str(self), "input": None}


def loads(raw: bytes) -> Any:
    """Parse a JSON body: orjson, else the standard library for what orjson refuses (NaN, UTF-16) and its errors;
    LoneSurrogate for a string only the standard library reads (orjson refuses them)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        parsed = json.loads(raw)
        if _utf8(raw) is raw and not _MAY_HOLD_SURROGATE.search(raw):  # the walk only where one can be
            return parsed
        path = lone_surrogate_path(parsed)
        if path is not None:
            raise LoneSurrogate(path) from None
        return parsed


# how a surrogate gets into UTF-8 JSON text: an escape `\ud800`-`\udfff`, or its UTF-8-like bytes (which the
# standard library decodes with "surrogatepass"); other encodings (UTF-16, a BOM) are always walked
_MAY_HOLD_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def lone_surrogate_path(root: Any) -> tuple[str | int, ...] | None:
    """The path (keys escaped) of the first key or string value holding a surrogate code point, else None."""
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return path
        elif isinstance(node, dict):
            for k, v in node.items():
                if _SURROGATE.search(k):
                    return (*path, _escaped(k))
                stack.append((v, (*path, k)))
        elif isinstance(node, list):
            stack.extend((v, (*path, i)) for i, v in enumerate(node))
    return None


_KEY_END = re.compile(rb'"[ \t\n\r]*:')  # every key of a JSON text ends so (and some strings hold it)
_WIDE_STARTS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")  # a BOM: the stdlib reads UTF-16/32 (and UTF-8 BOMs)


def _n_keys(obj: Any) -> int:
    """The keys of every object inside a parsed JSON value (the parsers make plain dicts and lists)."""
    try:
        return _n_keys_nested(obj)
    except RecursionError:  # nested deeper than Python's stack allows (orjson reads 1,024 levels)
        return _n_keys_flat(obj)


def _n_keys_nested(obj: Any) -> int:
    n = 0
    if obj.__class__ is dict:
        n = len(obj)
        obj = obj.values()
    for v in obj:
        if v.__class__ is dict or v.__class__ is list:
            n += _n_keys_nested(v)
    return n


def _n_keys_flat(obj: Any) -> int:
    n, stack = 0, [obj]
    while stack:
        v = stack.pop()
        if v.__class__ is dict:
            n += len(v)
            v = v.values()
        stack.extend(x for x in v if x.__class__ is dict or x.__class__ is list)
    return n


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string (unrolled: linear, no backtracking)
PATH_SEARCH_MAX = 1024**2  # bytes: above, a repeated key is named without its path (a second parse costs seconds)


def _utf8(raw: bytes) -> bytes | None:
    """The JSON text in UTF-8 (the standard library also reads UTF-16 and UTF-32, lone surrogates included, and a
    UTF-8 BOM); None when it cannot be read so (then its bytes say nothing of its keys)."""
    if raw[1:2] != b"\x00" and raw[:1] in b"{[ \t\r\n":  # UTF-8 (UTF-16/32 put a NUL or a BOM first)
        return raw
    if not raw.startswith(_WIDE_STARTS) and b"\x00" not in raw[:4]:
        return raw
    try:  # as json.loads decodes bytes
        return raw.decode(json.detect_encoding(raw), "surrogatepass").lstrip("\ufeff").encode("utf-8", "surrogatepass")
    except (UnicodeError, LookupError):
        return None


def keys_match(raw: bytes, parsed: Any) -> bool:
    """True when the parsed value has as many keys as the JSON text `raw` has key-value pairs, so the parser lost
    none to a repeat. Cheap first: the text's `"...":` endings (at least one per pair; strings may hold more);
    only when they differ, the colons outside strings (exactly one per pair)."""
    text = _utf8(raw)
    if text is None:
        return False
    n = _n_keys(parsed) if parsed.__class__ in (dict, list) else 0
    spaced = b" :" in text or b"\t:" in text or b"\n:" in text or b"\r:" in text
    if (len(_KEY_END.findall(text)) if spaced else text.count(b'":')) == n:  # bytes.count is faster
        return True
    return _STRING.sub(b'""', text).count(b":") == n


class _Object(dict[str, Any]):
    """A parsed object that remembers the first key its text gave twice."""

    repeated: str | None = None


def find_repeated_key(raw: bytes) -> tuple[str | int, ...] | None:
    """The exact check, a second parse keeping every pair: the path (keys and indexes, the repeated key last) of
    the first key an object of the JSON text gives twice, else None (also for a text the parser refuses or
    cannot nest as deeply: the body's own parse and validation answer for it)."""
    seen: list[bool] = []

    def pairs(items: list[tuple[str, Any]]) -> _Object:
        out = _Object()
        for k, v in items:
            if k in out and out.repeated is None:
                out.repeated = k
                seen.append(True)
            out[k] = v
        return out

    try:
        parsed = json.loads(raw, object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return None
    return _path_to_repeat(parsed) if seen else None


def _path_to_repeat(root: Any) -> tuple[str | int, ...] | None:
    """The first (depth-first, in the text's order) repeated key's path; iterative, each node visited once, its
    path kept as a link to its parent's (a tuple per node would cost nodes x depth)."""
    Link = tuple[str | int, Any] | None  # (key, parent's link)
    stack: list[tuple[Any, Link]] = [(root, None)]
    while stack:
        node, link = stack.pop()
        if isinstance(node, _Object) and node.repeated is not None:
            path: list[str | int] = [node.repeated]
            while link is not None:
                path.append(link[0])
                link = link[1]
            return tuple(reversed(path))
        items = node.items() if isinstance(node, dict) else enumerate(node)
        stack.extend((v, (k, link)) for k, v in reversed(list(items)) if isinstance(v, dict | list))
    return None


def repeated_key(raw: bytes, parsed: Any) -> tuple[str | int, ...] | None:
    """The path of the first key an object of the JSON text `raw` gives twice, else None; `parsed` is what a
    parser made of it (keeping the last of each key, as they all do). Cheap when the keys match
    (`keys_match`); a repeat in a body over PATH_SEARCH_MAX bytes is named by an empty path (the body)."""
    if keys_match(raw, parsed):
        return None
    if len(raw) <= PATH_SEARCH_MAX or _utf8(raw) is None:  # (unread text: only a parse can tell)
        return find_repeated_key(raw)
    return ()  # the exact count says a key repeats


async def repeated_key_off_loop(raw: bytes, parsed: Any) -> tuple[str | int, ...] | None:
    """`repeated_key` for a request handler: for a large body in a worker thread, so that its count (and a second
    parse, when one is needed) keeps the event loop, and the other requests, waiting no longer."""
    return await run_in_threadpool(repeated_key, raw, parsed) if len(raw) > 64 * 1024 else repeated_key(raw, parsed)


def repeated_key_error(path: tuple[str | int, ...]) -> dict[str, Any]:
    """The validation error (`loc` in the body) for a key given twice (an empty path: somewhere in a large body)."""
    where = f"the key {path[-1]!r} is given" if path else "a key of an object is given"
    return {
        "type": "repeated_key",
        "loc": ("body", *path),
        "msg": f"{where} more than once in its object; give it once (no value silently wins)",
        "input": None,
    }
