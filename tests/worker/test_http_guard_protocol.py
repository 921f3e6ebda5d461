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


def _serving(app: Any, stall_s: float) -> Iterator[int]:
    """uvicorn with the guard (as `neurules-admin serve` runs it: no websockets) serving `app` on a free port."""
    from worker.http_guard import guarded_protocol

    port = free_port()
    config = uvicorn.Config(
        app, port=port, loop="uvloop", http=guarded_protocol(8192, stall_s), ws="none", log_level="warning"
    )
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


@pytest.fixture()
def guarded_port() -> Iterator[int]:
    """`_app` served with a stall bound of 1 s."""
    yield from _serving(_app, 1.0)


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


async def _echo(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers `<method> <path> <body>` after 0.2 s (a decision's time: a half-closed client waits for it)."""
    if scope["type"] == "lifespan":
        await _app(scope, receive, send)
        return
    await asyncio.sleep(0.2)
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    out = b"%s %s %s" % (scope["method"].encode(), scope["path"].encode(), body)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"%d" % len(out))]})
    await send({"type": "http.response.body", "body": out})


@pytest.fixture()
def echo_port() -> Iterator[int]:
    """`_echo` served with a stall bound of 2 s."""
    yield from _serving(_echo, 2.0)


def _exchange(port: int, *parts: bytes, half_close: bool = False, answers: int = 1, wait_s: float = 5) -> bytes:
    """Send `parts` (a pause between them), optionally shut the sending side, read until `answers` answers (or
    `wait_s` of silence)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        for i, part in enumerate(parts):
            if i:
                time.sleep(0.1)
            s.sendall(part)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        data = b""
        try:
            while data.count(b"HTTP/1.1 ") < answers or not data.endswith((b"}", b"\r\n\r\n", b"x", b".", b" ")):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            pass
    return data


BODY = b'{"records":[{"age":1}]}'
H2C = (
    b"POST /predict HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
    b"HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: %d\r\n\r\n"
)


@pytest.mark.parametrize("split", [False, True])
def test_an_upgrade_to_http2_is_ignored_and_the_body_kept(echo_port: int, split: bool) -> None:
    """Java's HttpClient asks every first request on an http:// URL to become HTTP/2 (h2c): the POST was answered
    without its body (a 422 `body: required` from the service), and a body arriving later was parsed as a request."""
    head = H2C % len(BODY)
    data = _exchange(echo_port, *((head, BODY) if split else (head + BODY,)))
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"POST /predict " + BODY), data
    assert data.count(b"HTTP/1.1 ") == 1


def test_a_request_hidden_in_an_upgrade_requests_body_is_not_served(echo_port: int) -> None:
    hidden = b"GET /hidden HTTP/1.1\r\nHost: t\r\n\r\n"
    data = _exchange(echo_port, H2C % len(hidden), hidden, answers=2, wait_s=1.5)  # a second answer never comes
    assert data.count(b"HTTP/1.1 200 ") == 1 and data.endswith(b"POST /predict " + hidden), data


def test_a_websocket_upgrade_with_a_body_is_answered_not_held(echo_port: int) -> None:
    """It was handed to the websocket library, outside the stall bound: the connection stayed open for minutes."""
    head = (
        b"POST /healthz HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\n"
    )
    data = _exchange(echo_port, head + b"{}")
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"POST /healthz {}"), data


def test_a_chunked_upgrade_request_and_the_next_one_on_the_connection(echo_port: int) -> None:
    chunked = (
        b"POST /one HTTP/1.1\r\nHost: t\r\nConnection: keep-alive, Upgrade\r\nUpgrade: h2c\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
    )
    data = _exchange(echo_port, chunked + b"POST /two HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx", answers=2)
    assert data.count(b"HTTP/1.1 200 ") == 2 and b"POST /one x" in data and data.endswith(b"POST /two x"), data


def test_connect_is_refused(echo_port: int) -> None:
    """CONNECT (a tunnel) is not served: 400, not parsed again."""
    data = _exchange(echo_port, b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org\r\n\r\n")
    assert data.startswith(b"HTTP/1.1 400 ") and data.endswith(b"not supported."), data


def test_a_client_half_closing_after_its_request_gets_its_answer(echo_port: int) -> None:
    """A complete request followed by shutdown(SHUT_WR): the decision was made and audited, the answer never
    sent (the connection closed at the client's end of stream)."""
    head = b"POST /predict HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(BODY)
    data = _exchange(echo_port, head + BODY, half_close=True)
    assert data.startswith(b"HTTP/1.1 200 ") and data.endswith(b"POST /predict " + BODY), data
    two = _exchange(echo_port, head + BODY + head + BODY, half_close=True, answers=2)
    assert two.count(b"HTTP/1.1 200 ") == 2, two
    cut = _exchange(echo_port, head + BODY[:5], half_close=True)  # a request cut off: nothing to answer
    assert cut == b"", cut


def test_an_http_1_0_client_gets_no_100_continue(echo_port: int) -> None:
    """RFC 9110: a server must ignore `Expect: 100-continue` from an HTTP/1.0 client (it got a 1.1 interim answer)."""
    head = b"POST /p HTTP/1.0\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n"
    data = _exchange(echo_port, head, b"{}")
    assert data.startswith(b"HTTP/1.1 200 ") and b"100 Continue" not in data and data.endswith(b"POST /p {}"), data


def test_upgrade_requests_pipelined_in_one_read_are_each_answered(echo_port: int) -> None:
    """A reviewer: a second Upgrade request in the same read was a 400 that lost the first one's answer, and a
    request with `Connection: close` followed by more bytes after an Upgrade request was a 400 (the new parser
    lacked uvicorn's leniency for data after close)."""
    head = H2C % len(BODY)
    two = _exchange(echo_port, head + BODY + head + BODY, answers=2)
    assert two.count(b"HTTP/1.1 200 ") == 2 and two.endswith(b"POST /predict " + BODY), two
    closing = b"GET /b HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\nGET /c HTTP/1.1\r\nHost: t\r\n\r\n"
    data = _exchange(echo_port, head + BODY + closing, answers=2, wait_s=1.5)
    assert data.count(b"HTTP/1.1 200 ") == 2 and data.endswith(b"GET /b "), data
