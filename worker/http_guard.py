"""uvicorn's httptools protocol with the two bounds it lacks (the size of a request's head, and stalls), and three
client behaviours it mishandles.

uvicorn bounds neither: a client could send a header line of 100 MB (the parser holds it all, so four such
connections doubled a server's memory in a probe), or open a request and send nothing more, holding its
connection for good (slowloris). A proxy in front usually bounds both; `neurules-admin serve` must not
depend on one. So a request's head (request line and headers) of more than `max_head_bytes` is answered
431 and the connection closed (a pipelined head that begins in the same read as the blank line of the one
before it is counted from the next read on: at most one read, 256 KiB, beyond the bound); a head not
complete within `stall_s` seconds, or a request (head or body) from which nothing arrives for `stall_s`
seconds while the server waits for it, is answered 408 (head) or dropped (body: the application sees the
client disconnect, as when a client goes away). Time the server itself takes (reading paused while a large
upload is processed or while a pipelined request waits behind one being answered, a body not asked for yet
behind `Expect: 100-continue`) never counts, nor does an idle keep-alive connection (uvicorn's own timeout).

The three behaviours: a request asking to `Upgrade` (Java's HttpClient asks every first request on an http:// URL
to become HTTP/2, `Upgrade: h2c`; a websocket) was answered without its body (the parser hands the bytes after the
head to the new protocol), and the body was then parsed as the next request (a request hidden in a body was
served). The service speaks neither, so the Upgrade is ignored, as RFC 9110 allows: the request is parsed again
without it, its body as its body. A client that half-closes its side after a complete request (`shutdown(SHUT_WR)`)
got no answer, though the decision was made and audited: the connection now stays open to write the answer, then
closes. And `Expect: 100-continue` from an HTTP/1.0 client is ignored, as RFC 9110 requires (it got a 1.1 interim
answer).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


def _closing_answer(status: bytes, message: str) -> bytes:
    """A complete plain-text answer that closes the connection."""
    body = message.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )


_UPGRADE_HEADERS = (b"upgrade", b"http2-settings")


def _without_upgrade_tokens(connection: bytes) -> bytes:
    """A `Connection` header's value without the tokens naming the upgrade headers."""
    tokens = (t.strip() for t in connection.split(b","))
    return b", ".join(t for t in tokens if t and t.lower() not in _UPGRADE_HEADERS)


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that refuses an oversized request head (431) and drops a stalled request (408)."""

    max_head_bytes = 64 * 1024
    stall_s = 20.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_open = True  # waiting for a request's head (none begun, or one begun and not complete)
        self._head_bytes = 0  # bytes of the head awaited, received so far
        self._tail = b""  # the last bytes of a head's previous read: its blank line may straddle two reads
        self._receiving = False  # a request begun whose last byte has not arrived
        self._began = 0.0  # when that request began
        self._last_data = 0.0
        self._stall_timer: asyncio.TimerHandle | None = None
        self._upgrade_ignored = False  # the head asked to Upgrade: parsed again without it (`_without_upgrade`)
        self._half_closed = False  # the client closed its side after a complete request: answer it, then close

    def data_received(self, data: bytes) -> None:
        """Note the time and count the head's bytes, then parse; 431, before parsing, for a head over its bound."""
        self._last_data = self.loop.time()
        if self._head_open and self._count_head(data) > self.max_head_bytes:
            self._refuse(
                b"431 Request Header Fields Too Large", f"the request's head is over {self.max_head_bytes} bytes"
            )
            return
        self._feed(data)
        if self._receiving and self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self.stall_s, self._check_stall)

    def _feed(self, data: bytes) -> None:
        """uvicorn's parse of `data`, but a request asking to Upgrade (which the parser ends at its head) is parsed
        again without it, with what follows its head (each such request of the read in turn)."""
        self._unset_keepalive_if_required()
        while data:
            try:
                self.parser.feed_data(data)
                return
            except httptools.HttpParserError:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
                return
            except httptools.HttpParserUpgrade as e:
                data = self._without_upgrade(data[int(e.args[0]) :])

    def _without_upgrade(self, rest: bytes) -> bytes:
        """The bytes to parse instead, on a new parser: the head of the request that asked to Upgrade without
        `Upgrade`, its `Connection` token and `HTTP2-Settings` (so it cannot ask again), then `rest` (its body,
        any pipelined request). A CONNECT (a tunnel, for which the parser always stops) is a 400: nothing."""
        method, version = self.parser.get_method(), self.parser.get_http_version()
        self._upgrade_ignored = False
        if method == b"CONNECT":
            self.send_400_response("CONNECT and protocol upgrades are not supported.")
            return b""
        head = [method, b" ", self.url, b" HTTP/", version.encode("ascii"), b"\r\n"]
        for name, value in self.headers:
            kept = _without_upgrade_tokens(value) if name == b"connection" else value
            if kept and name not in _UPGRADE_HEADERS:
                head += [name, b": ", kept, b"\r\n"]
        self.parser = httptools.HttpRequestParser(self)
        with contextlib.suppress(AttributeError):  # as uvicorn makes its parser (httptools >= 0.6.3)
            self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        return b"".join(head) + b"\r\n" + rest

    def _count_head(self, data: bytes) -> int:
        """The head's bytes so far with `data`: up to its blank line when `data` holds it (the body is not the
        head), looked for across the end of the previous read too."""
        seen = self._tail + data  # the tail is empty but for a head sent in pieces
        ends = [i + len(mark) for mark in (b"\r\n\r\n", b"\n\n") if (i := seen.find(mark)) >= 0]
        if ends:
            self._head_bytes += min(ends) - len(self._tail)
            self._tail = b""
        else:
            self._head_bytes += len(data)
            self._tail = seen[-3:]
        return self._head_bytes

    def on_message_begin(self) -> None:
        """A request's first byte: from now on it must keep arriving."""
        self._receiving, self._began = True, self.loop.time()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        """The head is complete: its bound no longer applies. One asking to Upgrade starts nothing: it is parsed
        again without it (`_feed`); an HTTP/1.0 client's `Expect: 100-continue` is ignored."""
        self._head_open, self._head_bytes, self._tail = False, 0, b""
        if self.parser.should_upgrade() and not self._should_upgrade():
            self._upgrade_ignored = True
            return
        if self.parser.get_http_version() == "1.0":
            self.expect_100_continue = False
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        """A body part (none of a request parsed again without its Upgrade)."""
        if not self._upgrade_ignored:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """The request's last byte arrived: nothing to wait for until the next head begins."""
        self._head_open, self._receiving = True, False
        if not self._upgrade_ignored:
            super().on_message_complete()

    def eof_received(self) -> bool | None:  # type: ignore[override]  # asyncio.Protocol allows True: stay half-open
        """The client closed its side: keep the connection open to answer a request that arrived whole (then
        close, `on_response_complete`); else close it (a request cut off: the application sees a disconnect)."""
        if self._receiving or self.cycle is None or self.cycle.response_complete:
            return None
        self._half_closed = True
        return True

    def on_response_complete(self) -> None:
        """An answer went out: after the last one a half-closed client waits for, close."""
        super().on_response_complete()
        if self._half_closed and not self.pipeline and self.cycle is not None and self.cycle.response_complete:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the stall timer with the connection."""
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().connection_lost(exc)

    def _check_stall(self) -> None:
        """Drop a request that stalled, else look again when it next could have."""
        self._stall_timer = None
        if not self._receiving or self.transport.is_closing():
            return
        now = self.loop.time()
        if self._server_holds_it():  # the client's time starts again when the server lets it go on
            self._last_data = self._began = now
        deadline = self._last_data + self.stall_s
        if self._head_open:
            deadline = min(deadline, self._began + self.stall_s)
        if now < deadline:
            self._stall_timer = self.loop.call_later(deadline - now, self._check_stall)
        elif self._head_open:
            self._refuse(b"408 Request Timeout", f"the request's head did not arrive within {self.stall_s:g} s")
        else:
            self.transport.close()  # the application reading the body sees the client disconnect

    def _server_holds_it(self) -> bool:
        """Whether the wait is the server's: reading paused (flow control, or a pipelined request queued behind
        one being answered), an answer still being made before the next head, or a 100 Continue not sent yet."""
        cycle = self.cycle
        if self.flow.read_paused or cycle is None:
            return self.flow.read_paused
        return not cycle.response_complete if self._head_open else cycle.waiting_for_100_continue

    def _refuse(self, status: bytes, message: str) -> None:
        """Answer `status` and close (no request of ours reached the application); while an earlier pipelined
        request's answer is still going out, close without a word rather than write into it."""
        self.logger.warning("refused a request from %s: %s", self.client, message)
        if self.cycle is None or self.cycle.response_complete:
            self.transport.write(_closing_answer(status, message))
        self.transport.close()


def guarded_protocol(max_head_bytes: int, stall_s: float) -> type[GuardedHttpToolsProtocol]:
    """The protocol class with these bounds (uvicorn takes a class)."""
    return type(
        "GuardedHttpToolsProtocol",
        (GuardedHttpToolsProtocol,),
        {"max_head_bytes": max_head_bytes, "stall_s": stall_s},
    )
