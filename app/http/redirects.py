"""Redirects that never send a client to the host its own request named.

Starlette builds the URL of a trailing-slash redirect (`/console/assets` -> `/console/assets/`, `/v1/datasets/`
-> `/v1/datasets`) from the request's Host header, so `Host: evil.example` came back as
`Location: http://evil.example/...`: behind a proxy or cache that passes the client's Host through, an open
redirect and a poisoned cache entry. A Location on the request's own host is sent as a path instead (RFC 9110
allows a relative Location); one on another host is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

Headers = Sequence[tuple[bytes, bytes]]


def _host(scope_headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    return next((v for k, v in scope_headers if k == b"host"), None)


def relative_locations(headers: Headers, request_headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The response headers with a Location on the request's own Host rewritten as its path and query."""
    out = list(headers)
    host = _host(request_headers)
    for i, (k, v) in enumerate(out):
        if k.lower() != b"location" or host is None:
            continue
        parts = urlsplit(v.decode("latin-1"))
        if parts.scheme in ("http", "https") and parts.netloc.encode("latin-1").lower() == host.lower():
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            out[i] = (k, ("/" + path.lstrip("/")).encode("latin-1"))  # never `//host`: a relative URL to a host
    return out
