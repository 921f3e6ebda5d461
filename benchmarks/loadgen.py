"""Closed-loop HTTP load for the serving benchmark: wrk (Debian's) when installed, else a small asyncio client.

Both keep `concurrency` keep-alive connections busy with the same POST for a fixed time and report
requests/s, p50, p99 and errors (non-2xx answers and socket errors).
"""

from __future__ import annotations

import asyncio
import re
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse


@dataclass(frozen=True)
class LoadResult:
    """One cell: a fixed-time closed-loop run at one concurrency."""

    concurrency: int
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    tool: str


def wrk_available() -> bool:
    """Whether the wrk binary is on PATH."""
    return shutil.which("wrk") is not None


def _lua_script(body: bytes, headers: dict[str, str]) -> str:
    lines = ['wrk.method = "POST"', f"wrk.body = [==[{body.decode()}]==]"]
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in headers.items()]
    return "\n".join(lines) + "\n"


_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text.strip())
    if m is None:
        raise ValueError(f"unexpected wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out: str, concurrency: int, seconds: float) -> LoadResult:
    """Read requests, req/s, p50, p99 and errors from `wrk --latency` output."""
    pct = {m.group(1): _ms(m.group(2)) for m in re.finditer(r"^\s+(50|99)(?:\.0+)?%\s+(\S+)$", out, re.M)}
    total = re.search(r"(\d+) requests in ([\d.]+)(us|ms|s|m)", out)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if total is None or rps is None or "50" not in pct or "99" not in pct:
        raise ValueError(f"could not read wrk output:\n{out}")
    errors = sum(int(x) for x in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if sock is not None:
        errors += sum(int(x) for x in sock.groups())
    return LoadResult(
        concurrency, int(total.group(1)), seconds, float(rps.group(1)), pct["50"], pct["99"], errors, "wrk"
    )


def run_wrk(url: str, body: bytes, headers: dict[str, str], concurrency: int, seconds: float) -> LoadResult:
    """`wrk -t1 -c N --latency` POSTing `body` for `seconds`."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(_lua_script(body, headers))
        script = fh.name
    try:
        cmd = [
            "wrk",
            "-t1",
            f"-c{concurrency}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "--timeout",
            "10s",
            "-s",
            script,
            url,
        ]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        Path(script).unlink(missing_ok=True)
    return parse_wrk(out, concurrency, seconds)


async def _one_connection(
    host: str, port: int, request: bytes, stop_at: float, lat: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (int(line[15:]) for line in head.split(b"\r\n") if line[:15].lower() == b"content-length:"), 0
            )
            await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if head[9:10] != b"2":
                errors.append(int(head[9:12]))
    finally:
        writer.close()


async def _client_load(url: str, body: bytes, headers: dict[str, str], concurrency: int, seconds: float) -> LoadResult:
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    req = f"POST {u.path}?{u.query} HTTP/1.1\r\nHost: {host}\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode()
    lat: list[float] = []
    errors: list[int] = []
    start = time.perf_counter()
    await asyncio.gather(
        *[_one_connection(host, port, req + body, start + seconds, lat, errors) for _ in range(concurrency)]
    )
    elapsed = time.perf_counter() - start
    lat.sort()

    def q(p: float) -> float:
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    return LoadResult(concurrency, len(lat), elapsed, len(lat) / elapsed, q(0.5), q(0.99), len(errors), "asyncio")


def run_load(url: str, body: bytes, headers: dict[str, str], concurrency: int, seconds: float) -> LoadResult:
    """One cell with wrk when installed, else with the asyncio client."""
    if wrk_available():
        return run_wrk(url, body, headers, concurrency, seconds)
    return asyncio.run(_client_load(url, body, headers, concurrency, seconds))
