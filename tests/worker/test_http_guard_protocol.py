"""worker/http_guard.py: the head byte count (the body is not the head), and time the server takes not counted
against a pipelining client (uvicorn in a thread, a small ASGI app; tests/e2e/test_http_guard.py runs the service)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from tests.e2e.conftest import free_port
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


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """/slow answers after 3 s, anything else at once, with its path."""
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["path"] == "/slow":
        await asyncio.sleep(3)
    body = scope["path"].encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture()
def guarded_port() -> Iterator[int]:
    """uvicorn with the guard (stall bound 1 s) serving `_app` on a free port."""
    from worker.http_guard import guarded_protocol

    port = free_port()
    config = uvicorn.Config(_app, port=port, loop="uvloop", http=guarded_protocol(8192, 1.0), log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        time.sleep(0.05)
    yield port
    server.should_exit = True
    thread.join(10)


def test_a_pipelined_head_waiting_behind_a_slow_answer_is_not_a_stall(guarded_port: int) -> None:
    """A head that began behind a request taking longer than the stall bound (uvicorn stops reading meanwhile)
    was answered 408, written into the slow request's answer, and the connection reset: all three are answered."""
    with socket.create_connection(("127.0.0.1", guarded_port), timeout=10) as s:
        s.sendall(
            b"GET /slow HTTP/1.1\r\nHost: t\r\n\r\nGET /two HTTP/1.1\r\nHost: t\r\n\r\n"
            b"GET /three HTTP/1.1\r\nHost: t\r\n"
        )
        time.sleep(0.05)
        s.sendall(b"\r\n")  # the third head's end, in another segment
        data = b""
        while data.count(b"HTTP/1.1 ") < 3 or not data.endswith(b"/three"):
            chunk = s.recv(1 << 16)
            assert chunk, data
            data += chunk
    assert data.count(b"HTTP/1.1 200 ") == 3 and b"408" not in data, data
