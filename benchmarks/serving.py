"""Serving benchmark: single-record prediction with explanation at concurrency 1 and 32, and CSV batch rows/s.

    python benchmarks/serving.py                      # starts an embedded server itself (2 processes)
    python benchmarks/serving.py --url http://127.0.0.1:8000 --key nrk_...   # against a running server

Without --model it uploads heart.csv and trains a 10-rule list first (a few seconds). The load
generator is a minimal keep-alive HTTP/1.1 client on asyncio (uvloop), so the client costs little
CPU next to the server on a small machine.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx

ROOT = Path(__file__).resolve().parent.parent
HEART = ROOT.parent / "shared" / "datasets" / "heart.csv"


def free_port() -> int:
    """An unused TCP port."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(workers: int) -> tuple[str, str, subprocess.Popen[bytes], tempfile.TemporaryDirectory[str]]:
    """Start `neurules-admin serve --workers N` (embedded mode) in a temporary folder; returns url, key, proc."""
    tmp = tempfile.TemporaryDirectory(prefix="neurules-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURULES_")}
    env["NEURULES_LOG_LEVEL"] = "WARNING"
    admin = [sys.executable, "-m", "worker.cli"]  # the `neurules-admin` console script's code
    subprocess.run([*admin, "create-tenant", "bench"], cwd=tmp.name, env=env, check=True, capture_output=True)
    key = subprocess.run(
        [*admin, "create-key", "bench"], cwd=tmp.name, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()
    port = free_port()
    proc = subprocess.Popen(
        [*admin, "serve", "--port", str(port), "--workers", str(workers)],
        cwd=tmp.name,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(Path(tmp.name) / "serve.log", "wb"),  # noqa: SIM115
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    else:
        raise SystemExit("server did not start:\n" + (Path(tmp.name) / "serve.log").read_text()[-3000:])
    return url, key, proc, tmp


def heart_rows() -> tuple[list[str], list[dict[str, Any]]]:
    """heart.csv records without the target."""
    with open(HEART, newline="") as fh:
        rows = list(csv.DictReader(fh))
    header = [h for h in rows[0] if h != "target"]
    return header, [{h: float(r[h]) for h in header} for r in rows]


def prepare_model(client: httpx.Client, epochs: int) -> str:
    """Upload heart.csv, train 10 rules, return the version id."""
    with open(HEART, "rb") as fh:
        ds = client.post("/v1/datasets", files={"file": ("heart.csv", fh, "text/csv")}).json()["id"]
    job = client.post(
        "/v1/jobs",
        json={
            "dataset_id": ds,
            "target": "target",
            "model_name": "bench",
            "parameters": {"n_rules": 10, "epochs": epochs},
        },
    ).json()
    for _ in range(1200):
        job = client.get(f"/v1/jobs/{job['id']}").json()
        if job["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.25)
    if job["state"] != "succeeded":
        raise SystemExit(f"training failed: {job}")
    return str(job["model_version_id"])


async def _one_connection(
    host: str, port: int, request: bytes, stop_at: float, lat: list[float], errors: list[int]
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if status != 200:
                errors.append(status)
    finally:
        writer.close()


async def load(url: str, path: str, key: str, body: bytes, concurrency: int, seconds: float) -> dict[str, Any]:
    """Closed-loop load: `concurrency` keep-alive connections for `seconds`."""
    u = urlparse(url)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    req = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nX-API-Key: {key}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    lat: list[float] = []
    errors: list[int] = []
    # warm-up (caches, connections)
    await asyncio.gather(*[_one_connection(host, port, req, time.perf_counter() + 1.0, [], []) for _ in range(2)])
    start = time.perf_counter()
    await asyncio.gather(*[_one_connection(host, port, req, start + seconds, lat, errors) for _ in range(concurrency)])
    elapsed = time.perf_counter() - start
    lat.sort()

    def q(p: float) -> float:
        """Latency quantile in ms."""
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1000 if lat else float("nan")

    return {
        "concurrency": concurrency,
        "requests": len(lat),
        "rps": len(lat) / elapsed,
        "p50_ms": q(0.50),
        "p99_ms": q(0.99),
        "mean_ms": statistics.fmean(lat) * 1000 if lat else float("nan"),
        "errors": len(errors),
    }


def batch_rows_per_s(
    client: httpx.Client, ref: str, header: list[str], records: list[dict[str, Any]], n_rows: int, repeats: int
) -> dict[str, Any]:
    """CSV batch throughput: rows per second over `repeats` uploads of `n_rows` rows."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    for i in range(n_rows):
        r = records[i % len(records)]
        w.writerow([r[h] for h in header])
    data = buf.getvalue().encode()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        r = client.post(f"/v1/models/{ref}/predict.csv", files={"file": ("b.csv", data, "text/csv")}, timeout=300)
        times.append(time.perf_counter() - t0)
        if r.status_code != 200 or r.text.count("\n") != n_rows + 1:
            raise SystemExit(f"batch failed: {r.status_code} {r.text[:300]}")
    best, med = min(times), statistics.median(times)
    return {
        "rows": n_rows,
        "repeats": repeats,
        "median_s": med,
        "rows_per_s": n_rows / med,
        "best_rows_per_s": n_rows / best,
    }


def main() -> None:
    """Run the benchmark and print a table (and JSON with --json)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="running server (default: start an embedded one)")
    ap.add_argument("--key", help="API key for --url")
    ap.add_argument("--model", help="model reference to use (default: train one on heart.csv)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="server processes when starting one")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--batch-rows", type=int, default=10_000)
    ap.add_argument("--batch-repeats", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--no-explain", action="store_true", help="also measure without the explanation")
    ap.add_argument("--json", help="write results to this file")
    args = ap.parse_args()

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    proc = tmp = None
    if args.url:
        if not args.key:
            raise SystemExit("--key is required with --url")
        url, key = args.url.rstrip("/"), args.key
    else:
        url, key, proc, tmp = start_server(args.workers)
    try:
        with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=60) as client:
            ref = args.model or prepare_model(client, args.epochs)
            header, records = heart_rows()
            body = json.dumps({"records": [records[0]]}).encode()
            results = []
            variants = [("predict + explanation", f"/v1/models/{ref}/predict")]
            if args.no_explain:
                variants.append(("predict, no explanation", f"/v1/models/{ref}/predict?explain=false"))
            for label, path in variants:
                for c in args.concurrency:
                    r = asyncio.run(load(url, path, key, body, c, args.seconds))
                    r["endpoint"] = label
                    results.append(r)
                    print(f"  {label} c={c}: {r['rps']:.0f} req/s", file=sys.stderr)
            batch = batch_rows_per_s(client, ref, header, records, args.batch_rows, args.batch_repeats)
    finally:
        if proc is not None:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(20)
        if tmp is not None:
            tmp.cleanup()

    print(
        f"\nserver: {url if args.url else f'embedded, {args.workers} process(es), SO_REUSEPORT'}; "
        f"{args.seconds:.0f} s per row; one heart.csv record per request"
    )
    print(f"{'endpoint':<26}{'conc':>5}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'requests':>10}")
    for r in results:
        print(
            f"{r['endpoint']:<26}{r['concurrency']:>5}{r['rps']:>9.0f}{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}"
            f"{r['errors']:>8}{r['requests']:>10}"
        )
    print(
        f"CSV batch: {batch['rows']} rows x {batch['repeats']}: median {batch['median_s']:.3f} s -> "
        f"{batch['rows_per_s']:.0f} rows/s (best {batch['best_rows_per_s']:.0f})"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"single": results, "batch": batch}, indent=2))


if __name__ == "__main__":
    main()
