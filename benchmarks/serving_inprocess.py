"""CPU per one-record prediction through the service's ASGI app, in process (no network, no load generator).

    python benchmarks/serving_inprocess.py                 # 2,000 requests x 5 rounds at concurrency 32
    python benchmarks/serving_inprocess.py --profile       # and cProfile's top functions

The quick loop for work on the request path: the same app `neurules-admin serve` builds (embedded,
SQLite, audit rows committed by the writer thread), the benchmark's 10-rule list and record; prints
the best round's process CPU (all threads) and wall time per request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving import bench_record, heart_table, ten_rule_list


async def call(app: Any, scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """One request through the ASGI app; the messages it sent."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(dict(scope), receive, send)
    return sent


def request_scope(path: str, key: str, body: bytes) -> dict[str, Any]:
    """The ASGI scope of a JSON POST with the API key."""
    headers = [(b"host", b"t"), (b"content-type", b"application/json"), (b"x-api-key", key.encode())]
    headers.append((b"content-length", str(len(body)).encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "root_path": "",
        "state": {},
    }


async def run(requests: int, concurrency: int, rounds: int, profile: bool) -> None:
    """Build the service, import the model, time rounds of requests."""
    import httpx

    from app.admin import create_key, create_tenant, migrate
    from app.settings import Settings
    from worker.service import build_service

    settings = Settings(data_dir=Path(tempfile.mkdtemp()), log_level="WARNING", embedded_worker=False)
    url = settings.resolved_database_url
    migrate(url)
    create_tenant(url, "bench")
    _, key = create_key(url, "bench")
    app = build_service(settings, configure_logs=False)
    names, X, y = heart_table()
    rl = ten_rule_list(names, X, y)
    body = json.dumps({"records": [bench_record(rl, names, X)]}).encode()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            doc = {"name": "bench", "rule_list": rl.to_dict()}
            ref = (await client.post("/v1/models", json=doc, headers={"X-API-Key": key})).json()["id"]
        scope = request_scope(f"/v1/models/{ref}/predict", key, body)

        async def worker(n: int) -> None:
            for _ in range(n):
                assert (await call(app, scope, body))[0]["status"] == 200

        await asyncio.gather(*[worker(100) for _ in range(concurrency)])  # warm
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        best: list[tuple[float, float]] = []
        for _ in range(rounds):
            t0, c0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*[worker(requests // concurrency) for _ in range(concurrency)])
            best.append((time.process_time() - c0, time.perf_counter() - t0))
        if profiler is not None:
            import pstats

            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    cpu, wall = min(best)
    n = requests // concurrency * concurrency
    print(
        f"{n} requests x {rounds} rounds at c={concurrency}: "
        f"best {cpu / n * 1e6:.0f} us CPU, {wall / n * 1e6:.0f} us wall per request"
    )


def main() -> None:
    """Parse options and run."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    import uvloop

    uvloop.run(run(args.requests, args.concurrency, args.rounds, args.profile))


if __name__ == "__main__":
    main()
