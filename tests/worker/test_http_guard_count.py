"""The head byte count of worker/http_guard.py: the body is not the head, wherever the head's blank line falls."""

from __future__ import annotations

import pytest

from worker.http_guard import GuardedHttpToolsProtocol

HEAD = b"POST /v1/x HTTP/1.1\r\nHost: t\r\nContent-Length: 300000\r\n\r\n"


def _counter() -> GuardedHttpToolsProtocol:
    p = GuardedHttpToolsProtocol.__new__(GuardedHttpToolsProtocol)  # the count needs no connection
    p._head_bytes, p._tail = 0, b""
    return p


@pytest.mark.parametrize("cut", [1, 20, len(HEAD) - 3, len(HEAD) - 2, len(HEAD) - 1])
def test_a_head_ending_anywhere_in_a_read_counts_only_the_head(cut: int) -> None:
    """A 300 kB body in the read after the head's blank line (split across the two reads or not) was counted as
    head, so a large upload would have been a 431."""
    p = _counter()
    first, rest = HEAD[:cut], HEAD[cut:] + b"x" * 300_000
    p._count_head(first)
    assert p._count_head(rest) == len(HEAD)
    p = _counter()  # the whole head and some body in one read (the parser ends the count after it)
    assert p._count_head(HEAD + b"x" * 300_000) == len(HEAD)


def test_a_head_with_bare_line_feeds_and_a_head_without_end() -> None:
    p = _counter()
    assert p._count_head(b"GET / HTTP/1.1\nHost: t\n\n" + b"y" * 100_000) == 24
    p = _counter()
    assert p._count_head(b"GET / HTTP/1.1\r\nX: " + b"a" * 5000) == 5019
    assert p._count_head(b"a" * 5000) == 10019
