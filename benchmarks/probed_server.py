"""One service process with probes for tail latency: GC pauses, event-loop lag, and the stack of each stall.

    python benchmarks/probed_server.py --port 8000 --report /tmp/probe.json     (settings from NEURULES_*)

- GC: `gc.callbacks` times every collection (generation, milliseconds).
- Loop lag: a task asks to wake every millisecond and records how late it wakes.
- Stalls: a watchdog thread sees when the loop has not ticked for --stall-ms and takes the loop
  thread's Python stack (`sys._current_frames`); a stall inside C that holds the GIL shows as the
  frame that was running when it began.
On SIGTERM the server stops and the report (JSON) is written.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import signal
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Probes:
    """GC timings, loop lag samples and stall stacks of one process."""

    def __init__(self, stall_ms: float) -> None:
        self.stall_s = stall_ms / 1000
        self.gc_start = 0.0
        self.gc: list[tuple[int, float]] = []  # (generation, ms)
        self.lags: list[float] = []  # ms late per 1 ms sleep
        self.tick = time.perf_counter()
        self.stalls: Counter[str] = Counter()
        self.stall_ms: Counter[str] = Counter()
        self.loop_thread = threading.get_ident()
        self.running = True
        self.started = time.perf_counter()
        self.gen2_at: list[float] = []  # seconds after start of each full collection

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        """gc.callbacks hook."""
        if phase == "start":
            self.gc_start = time.perf_counter()
        else:
            self.gc.append((info["generation"], (time.perf_counter() - self.gc_start) * 1000))
            if info["generation"] == 2:
                self.gen2_at.append(round(time.perf_counter() - self.started, 2))

    async def lag_probe(self) -> None:
        """Sleep 1 ms at a time and record the lateness."""
        while self.running:
            t0 = time.perf_counter()
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.lags.append((now - t0 - 0.001) * 1000)
            self.tick = now

    def watchdog(self) -> None:
        """Take the loop thread's stack once per stall."""
        seen = 0.0
        while self.running:
            time.sleep(0.002)
            tick = self.tick
            stalled = time.perf_counter() - tick
            if stalled > self.stall_s and tick != seen:
                seen = tick
                frame = sys._current_frames().get(self.loop_thread)  # noqa: SLF001 -- the one way to see it
                stack = "".join(traceback.format_stack(frame, limit=12)) if frame else "<no frame>"
                self.stalls[stack] += 1
                self.stall_ms[stack] += stalled * 1000

    def report(self) -> dict[str, Any]:
        """Summary: GC by generation, lag quantiles, the stall stacks by count."""
        lags = sorted(self.lags)

        def q(p: float) -> float:
            return lags[min(len(lags) - 1, int(p * len(lags)))] if lags else float("nan")

        by_gen: dict[str, Any] = {}
        for gen in (0, 1, 2):
            ms = sorted(m for g, m in self.gc if g == gen)
            if ms:
                by_gen[str(gen)] = {
                    "count": len(ms),
                    "total_ms": round(sum(ms), 1),
                    "max_ms": round(ms[-1], 2),
                    "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 2),
                    "over_5ms": sum(m > 5 for m in ms),
                }
        by_gen["2_at_s"] = self.gen2_at
        stacks = [
            {"count": n, "stalled_ms_at_detection": round(self.stall_ms[s], 1), "stack": s}
            for s, n in self.stalls.most_common(12)
        ]
        from collections import Counter as C

        kinds = C(type(o).__name__ for o in gc.get_objects())
        return {
            "heap": {"tracked": sum(kinds.values()), "frozen": gc.get_freeze_count(), "top": kinds.most_common(8)},
            "gc": by_gen,
            "loop_lag_ms": {"samples": len(lags), "p50": q(0.5), "p99": q(0.99), "p999": q(0.999), "max": q(1.0)},
            "stalls": {"count": sum(self.stalls.values()), "threshold_ms": self.stall_s * 1000, "stacks": stacks},
        }


async def serve(port: int, probes: Probes) -> None:
    """The service (as `neurules-admin serve` builds one process) on uvloop, with the probes."""
    import uvicorn

    from app.process_tuning import tune_server_process
    from app.settings import Settings
    from worker.serve import reuseport_socket
    from worker.service import build_service

    app = build_service(Settings())
    tune_server_process()  # as worker.serve does
    config = uvicorn.Config(app, http="httptools", lifespan="on", access_log=False, log_config=None)
    probes.loop_thread = threading.get_ident()
    lag = asyncio.create_task(probes.lag_probe())
    threading.Thread(target=probes.watchdog, daemon=True).start()
    await uvicorn.Server(config).serve(sockets=[reuseport_socket("127.0.0.1", port)])
    probes.running = False
    await lag


def main() -> None:
    """Run until SIGTERM, then write the report."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--stall-ms", type=float, default=10.0)
    args = ap.parse_args()
    import uvloop

    from app.admin import migrate
    from app.settings import Settings

    migrate(Settings().resolved_database_url)
    probes = Probes(args.stall_ms)
    gc.callbacks.append(probes.on_gc)

    def write_report(*_: object) -> None:
        Path(args.report).write_text(json.dumps(probes.report(), indent=2))
        sys.exit(0)

    signal.signal(signal.SIGTERM, write_report)  # uvicorn re-raises SIGTERM after its shutdown: we get it then
    uvloop.run(serve(args.port, probes))
    write_report()


if __name__ == "__main__":
    main()
