"""A SIGTERM stops the server within NEURULES_SHUTDOWN_GRACE_S even while a client trickles an upload (an operator
probe: a 200 KB/s upload held the stop for 4 min 20 s, past any orchestrator's kill, which then SIGKILLed it)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import rule_list_doc
from tests.e2e.conftest import ADMIN, Proc, admin, clean_env, free_port, wait_ready

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_sigterm_stops_within_the_grace_while_an_upload_trickles(tmp_path: Path) -> None:
    env = clean_env(NEURULES_SHUTDOWN_GRACE_S="2")
    admin(["create-tenant", "t"], env, tmp_path)
    key = admin(["create-key", "t"], env, tmp_path)
    port = free_port()
    proc = Proc([*ADMIN, "serve", "--port", str(port)], env, tmp_path, tmp_path / "serve.log")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, proc)
        r = httpx.post(
            f"{url}/v1/models", json={"name": "risk", "rule_list": rule_list_doc()}, headers={"X-API-Key": key}
        )
        assert r.status_code == 201, r.text
        conn = socket.create_connection(("127.0.0.1", port))
        head = (
            f"POST /v1/models/risk@1/predict.csv HTTP/1.1\r\nHost: x\r\nX-API-Key: {key}\r\n"
            "Content-Type: multipart/form-data; boundary=BOUNDARY\r\nContent-Length: 40000000\r\n\r\n"
            '--BOUNDARY\r\nContent-Disposition: form-data; name="file"; filename="r.csv"\r\n'
            "Content-Type: text/csv\r\n\r\nage,income,smoker\n"
        )
        conn.sendall(head.encode())
        for _ in range(8):  # a slow client, not a stalled one (a byte well within NEURULES_REQUEST_STALL_S)
            time.sleep(0.25)
            conn.sendall(b"67,50,yes\n" * 2000)
        t0 = time.monotonic()
        os.killpg(proc.p.pid, signal.SIGTERM)
        deadline = t0 + 30
        while proc.p.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # it goes on trickling, until the server closes the connection
                conn.sendall(b"67,50,yes\n" * 2000)
            time.sleep(0.25)
        stopped_after = time.monotonic() - t0
        assert proc.p.poll() is not None, f"still running 30 s after SIGTERM:\n{proc.tail()}"
        assert stopped_after < 12, (stopped_after, proc.tail())
        conn.close()
    finally:
        proc.stop()
