"""The real server's bounds on a request's head and on stalls (worker/http_guard.py), over raw sockets.

uvicorn bounded neither: a 50 MB header line was answered 200, four unfinished 100 MB heads doubled a
server's memory, and a half-sent head or body held its connection for as long as the client liked.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.conftest import rule_list_doc
from tests.e2e.conftest import Service, clean_env, serve_embedded

STALL_S = 1.5


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """`neurules-admin serve` with a small head bound and a short stall bound."""
    env = clean_env(NEURULES_MAX_HEADER_BYTES="8192", NEURULES_REQUEST_STALL_S=str(STALL_S))
    yield from serve_embedded(tmp_path_factory.mktemp("guarded"), env)


def _connect(url: str) -> socket.socket:
    u = urlsplit(url)
    return socket.create_connection((u.hostname, u.port), timeout=30)


def _read_all(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    data = b""
    try:
        while chunk := s.recv(1 << 16):
            data += chunk
    except ConnectionResetError:
        pass
    return data


def _one_answer(s: socket.socket) -> bytes:
    """One whole answer on a kept-alive connection: its head, then Content-Length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(1 << 16)
        assert chunk, f"the connection closed after {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = s.recv(1 << 16)
        assert chunk, "the connection closed mid-body"
        body += chunk
    return head + b"\r\n\r\n" + body


def _audit_rows(svc: Service) -> int:
    r = httpx.get(f"{svc.url}/v1/audit", params={"limit": 500}, headers={"X-API-Key": svc.key})
    assert r.status_code == 200, r.text
    return len(r.json()["items"])


def test_an_oversized_head_is_a_431_and_the_server_goes_on(guarded) -> None:
    with _connect(guarded.url) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 20_000)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the server may close before the end
            s.sendall(b"a" * 200_000)
        answer = _read_all(s)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:200]
    assert b"over 8192 bytes" in answer
    with _connect(guarded.url) as s:  # the whole head in one read, followed by nothing
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
        assert _read_all(s).startswith(b"HTTP/1.1 431 ")
    assert httpx.get(f"{guarded.url}/healthz").status_code == 200
    many = {f"x-h{i}": "v" * 60 for i in range(80)}  # ~6 KB of headers: within the bound
    assert httpx.get(f"{guarded.url}/healthz", headers=many).status_code == 200


@pytest.mark.parametrize("trickle", [False, True])
def test_a_head_that_does_not_arrive_is_a_408(guarded, trickle: bool) -> None:
    """A head left unfinished, or sent a byte at a time (slowloris), is answered 408 and closed."""
    began = time.monotonic()
    with _connect(guarded.url) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
        if trickle:
            for _ in range(int(STALL_S * 10)):
                time.sleep(0.25)
                try:
                    s.sendall(b"X")
                except (BrokenPipeError, ConnectionResetError):
                    break
        answer = _read_all(s)
    waited = time.monotonic() - began
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert STALL_S * 0.9 <= waited < STALL_S + 5, waited


def test_a_body_that_stops_arriving_is_dropped_without_a_decision(guarded) -> None:
    h = {"X-API-Key": guarded.key}
    v = httpx.post(f"{guarded.url}/v1/models", json={"name": "stall", "rule_list": rule_list_doc()}, headers=h)
    assert v.status_code == 201, v.text
    before = _audit_rows(guarded)
    body = b'{"records": [{"age": 70, "income": 5, "smoker": "yes"}]}'
    began = time.monotonic()
    with _connect(guarded.url) as s:
        s.sendall(
            f"POST /v1/models/{v.json()['id']}/predict HTTP/1.1\r\nHost: t\r\nX-API-Key: {guarded.key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body[:20]
        )
        answer = _read_all(s)
    assert answer == b"" and time.monotonic() - began < STALL_S + 5
    assert _audit_rows(guarded) == before
    r = httpx.post(
        f"{guarded.url}/v1/models/{v.json()['id']}/predict",
        content=body,
        headers={**h, "content-type": "application/json"},
    )
    assert r.status_code == 200 and _audit_rows(guarded) == before + 1


def test_time_the_server_takes_and_idle_keep_alive_do_not_count(guarded) -> None:
    """A keep-alive connection idle past the stall bound still serves its next request; a predict.csv upload
    read slower than it arrives (reading paused while the server scores) is answered whole."""
    with _connect(guarded.url) as s:
        for _ in range(2):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
            assert _one_answer(s).startswith(b"HTTP/1.1 200 ")
            time.sleep(STALL_S * 1.5)
    h = {"X-API-Key": guarded.key}
    v = httpx.post(f"{guarded.url}/v1/models", json={"name": "big", "rule_list": rule_list_doc()}, headers=h)
    rows = 400_000
    data = "age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 9},{'yes' if i % 2 else 'no'}\n" for i in range(rows))
    r = httpx.post(
        f"{guarded.url}/v1/models/{v.json()['id']}/predict.csv",
        files={"file": ("a.csv", data.encode(), "text/csv")},
        headers=h,
        timeout=120,
    )
    assert r.status_code == 200, r.text[:500]
    assert r.text.count("\n") == rows + 1
