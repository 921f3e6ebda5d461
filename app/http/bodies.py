"""Why a request body could not be read, in words the caller can act on; and the methods a path allows.

FastAPI answers a JSON body it cannot parse for a reason other than a syntax error (nesting deeper than
the parser's recursion limit, an integer longer than Python converts, bytes that are not UTF-8) with a
bare 400 "There was an error parsing the body", the reason in `__cause__`. The service answers 422
`invalid_input` naming the reason instead, as documented for every operation with a body. A body sent
with a content type that is not JSON is not parsed at all; its 422 names the content type.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any

FASTAPI_BODY_ERROR = "There was an error parsing the body"
OBJECT_TYPE_ERRORS = frozenset({"dict_type", "model_type", "model_attributes_type"})


def is_json_content_type(content_type: str | None) -> bool:
    """Whether FastAPI parses a body of this type as JSON (application/json or application/*+json)."""
    if not content_type:
        return False  # FastAPI's strict content type: no header, no JSON
    main = content_type.split(";", 1)[0].strip().lower()
    return main == "application/json" or (main.startswith("application/") and main.endswith("+json"))


def not_json_message(error: dict[str, Any], content_type: str | None) -> str | None:
    """`body: ...` naming the content type, when a JSON body was refused as "not an object" because it was
    sent as another type (curl's `-d` sends application/x-www-form-urlencoded): FastAPI then passes the bytes
    unread, and "must be an object" would blame a body that may well be one. None otherwise."""
    if tuple(error.get("loc", ())) != ("body",) or error.get("type") not in OBJECT_TYPE_ERRORS:
        return None
    if is_json_content_type(content_type):
        return None
    sent = f"content type {content_type!r}" if content_type else "no content type"
    return f"body: sent with {sent}, so not read as JSON; send it with 'Content-Type: application/json'"


def is_unreadable_body(status_code: int, detail: object) -> bool:
    """Whether an HTTP error is FastAPI's bare "could not parse the body" 400."""
    return status_code == 400 and detail == FASTAPI_BODY_ERROR


def unreadable_body_message(cause: BaseException | None, content_encoding: str | None = None) -> str:
    """`body: <reason>` for the exception that stopped the JSON parser (JSON bodies are read as sent: a
    compressed one is named as such rather than as bytes that are not UTF-8)."""
    encoding = (content_encoding or "").strip().lower()
    if encoding not in ("", "identity"):
        return f"body: Content-Encoding {encoding!r} is not read on JSON bodies; send the JSON uncompressed"
    if isinstance(cause, RecursionError):
        return "body: the JSON is nested too deeply to be read; flatten it (a few hundred levels at most)"
    if isinstance(cause, UnicodeDecodeError):
        return f"body: not valid UTF-8 (byte {cause.start}); send JSON encoded as UTF-8"
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        limit = sys.get_int_max_str_digits()
        return f"body: a number has more than {limit} digits; send it as a string or round it"
    reason = f": {cause}" if cause is not None else ""
    return f"body: cannot be read as JSON{reason}"[:300]


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile("^" + "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$")


class AllowedMethods:
    """The methods each documented path answers (for the `Allow` header of a 405)."""

    def __init__(self, paths: dict[str, Iterable[str]]) -> None:
        self._table = [(_template_regex(t), {m.upper() for m in methods}) for t, methods in paths.items()]

    def of(self, path: str) -> list[str]:
        """Every method of every path template that matches `path`, sorted; HEAD wherever GET is (`app.http.head`)."""
        methods: set[str] = set()
        for regex, ms in self._table:
            if regex.match(path):
                methods |= ms
        if "GET" in methods:
            methods.add("HEAD")
        return sorted(methods)
