"""Where each slow one-record request spends its time, at concurrency 1 (one service process, embedded).

    python benchmarks/request_timeline.py --seconds 8
    python benchmarks/request_timeline.py --seconds 8 --env NEURULES_SQLITE_SYNCHRONOUS=normal

Starts one service process (this script with --serve) whose ASGI app, `AuditWriter.write` (the
request's wait for its audit commit) and `AuditWriter._write` (the writer thread's transaction) record
their start and end on the monotonic clock, which every process of the machine shares. A keep-alive
client sends the serving benchmark's request one at a time and records each latency. Each client
request is then matched with the server's records inside it, and the slow ones (over --slow-ms) are
split into: network in, server, network out, audit wait, the writer's transaction, the hand-off to
the writer thread (queued -> transaction start) and the wake-up back (transaction end -> request
resumes). Prints the latency quantiles, the split of the slow requests and how many requests lie
between consecutive slow transactions (a fixed period points at something periodic, such as a WAL
checkpoint).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import signal
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

Span = tuple[float, float]


def serve(port: int, report: Path) -> None:
    """The service process (as `neurules-admin serve` builds one), with the three timing hooks."""
    import uvicorn
    import uvloop

    from app.admin import migrate
    from app.process_tuning import tune_server_process
    from app.services import audit
    from app.settings import Settings
    from worker.serve import reuseport_socket
    from worker.service import build_service

    spans: dict[str, list[Span]] = {"request": [], "audit_wait": [], "transaction": []}
    clock = time.perf_counter
    write, transaction = audit.AuditWriter.write, audit.AuditWriter._write  # noqa: SLF001 -- timing it is the point

    async def timed_write(self: audit.AuditWriter, rows: list[dict[str, Any]]) -> list[int]:
        t = clock()
        seqs = await write(self, rows)
        spans["audit_wait"].append((t, clock()))
        return seqs

    def timed_transaction(self: audit.AuditWriter, rows: list[dict[str, Any]]) -> list[int]:
        t = clock()
        seqs = transaction(self, rows)
        spans["transaction"].append((t, clock()))
        return seqs

    audit.AuditWriter.write = timed_write  # type: ignore[method-assign]
    audit.AuditWriter._write = timed_transaction  # type: ignore[method-assign]  # noqa: SLF001
    settings = Settings()
    migrate(settings.resolved_database_url)
    app = build_service(settings)

    async def timed_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        t = clock()
        await app(scope, receive, send)
        if scope["type"] == "http":
            spans["request"].append((t, clock()))

    tune_server_process()

    def dump(*_: object) -> None:
        report.write_text(json.dumps(spans))
        sys.exit(0)

    signal.signal(signal.SIGTERM, dump)
    config = uvicorn.Config(timed_app, http="httptools", lifespan="on", access_log=False, log_config=None)
    uvloop.run(uvicorn.Server(config).serve(sockets=[reuseport_socket("127.0.0.1", port)]))
    dump()


class KeepAliveClient:
    """One HTTP/1.1 connection sending the same request, one at a time."""

    def __init__(self, url: str, request: bytes) -> None:
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request = request

    def one(self) -> None:
        """Send the request and read the whole answer."""
        self.sock.sendall(self.request)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += self.sock.recv(65536)
        head, _, rest = buf.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise SystemExit(f"unexpected answer: {head[:200]!r}")
        length = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        while len(rest) < length:
            rest += self.sock.recv(65536)

    def run(self, seconds: float) -> list[Span]:
        """(start, end) of each request for `seconds`."""
        out: list[Span] = []
        end = time.perf_counter() + seconds
        while (t := time.perf_counter()) < end:
            self.one()
            out.append((t, time.perf_counter()))
        return out


def inside(spans: list[Span], starts: list[float], a: float, b: float) -> Span | None:
    """The first span that starts within [a, b]."""
    i = bisect.bisect_left(starts, a)
    return spans[i] if i < len(spans) and spans[i][0] <= b else None


def split(client: list[Span], server: dict[str, list[Span]]) -> list[dict[str, float]]:
    """Each client request with the server's spans inside it, in milliseconds."""
    spans = {k: sorted(v) for k, v in server.items()}
    starts = {k: [s[0] for s in v] for k, v in spans.items()}
    rows = []
    for a, b in client:
        req = inside(spans["request"], starts["request"], a, b)
        wait = inside(spans["audit_wait"], starts["audit_wait"], a, b)
        tx = inside(spans["transaction"], starts["transaction"], a, b)
        if req is None or wait is None or tx is None:
            continue
        rows.append(
            {
                "client": (b - a) * 1e3,
                "net_in": (req[0] - a) * 1e3,
                "server": (req[1] - req[0]) * 1e3,
                "net_out": (b - req[1]) * 1e3,
                "audit_wait": (wait[1] - wait[0]) * 1e3,
                "transaction": (tx[1] - tx[0]) * 1e3,
                "hand_off": (tx[0] - wait[0]) * 1e3,
                "wake_up": (wait[1] - tx[1]) * 1e3,
                "start": a,
            }
        )
    return rows


def quantile(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of values."""
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def report(rows: list[dict[str, float]], seconds: float, slow_ms: float) -> None:
    """Print the quantiles, the split of the slow requests and the spacing of slow transactions."""
    lat = [r["client"] for r in rows]
    print(f"{len(rows)} requests in {seconds:.0f} s ({len(rows) / seconds:,.0f}/s), client latency ms:")
    print("  " + "  ".join(f"p{int(q * 1000) / 10:g} {quantile(lat, q):.2f}" for q in (0.5, 0.9, 0.99, 0.999, 1.0)))
    slow = [r for r in rows if r["client"] > slow_ms]
    print(f"slow (> {slow_ms} ms): {len(slow)} ({100 * len(slow) / len(rows):.2f} %)")
    parts = ["net_in", "server", "net_out", "audit_wait", "transaction", "hand_off", "wake_up"]
    print("| part | median, all | median, slow | mean, slow | slow requests where it is > 1 ms |")
    print("|---|---:|---:|---:|---:|")
    for p in parts:
        every, sl = [r[p] for r in rows], [r[p] for r in slow] or [0.0]
        over = sum(r[p] > 1.0 for r in slow)
        medians = f"{statistics.median(every):.3f} | {statistics.median(sl):.3f}"
        print(f"| {p} | {medians} | {statistics.mean(sl):.3f} | {over} |")
    idx = [i for i, r in enumerate(rows) if r["transaction"] > slow_ms]
    gaps = [b - a for a, b in itertools.pairwise(idx)]
    print(f"transactions over {slow_ms} ms: {len(idx)}; requests between consecutive ones: {gaps[:40]}")


def main() -> None:
    """Start the timed server, load it at c=1, print where the slow requests' time went."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--slow-ms", type=float, default=2.0)
    ap.add_argument("--env", nargs="*", default=[], help="NAME=VALUE settings for the service")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--report", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve is not None:
        serve(args.serve, args.report)
        return
    from benchmarks.servers import start_service
    from benchmarks.serving import bench_record, heart_table, import_model, ten_rule_list

    names, X, y = heart_table()
    rl = ten_rule_list(names, X, y)
    body = json.dumps({"records": [bench_record(rl, names, X)]}).encode()
    report_path = Path(f"/tmp/neurules-timeline-{time.time_ns()}.json")

    def program(port: int) -> list[str]:
        return [sys.executable, __file__, "--serve", str(port), "--report", str(report_path)]

    extra = dict(kv.split("=", 1) for kv in args.env)
    server = start_service(1, extra, distributed_pg=None, redis="redis://127.0.0.1:6379/0", program=program)
    try:
        ref = import_model(server, rl.to_dict())
        head = f"POST /v1/models/{ref}/predict HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        head += f"X-API-Key: {server.key}\r\nContent-Length: {len(body)}\r\n\r\n"
        client = KeepAliveClient(server.url, head.encode() + body)
        client.run(1.0)  # warm-up
        spans = client.run(args.seconds)
    finally:
        server.stop()
    rows = split(spans, json.loads(report_path.read_text()))
    report_path.unlink()
    report(rows, args.seconds, args.slow_ms)


if __name__ == "__main__":
    main()
