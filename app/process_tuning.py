"""A server process's runtime policy: freeze the start-up heap for the GC, hand the GIL over sooner.

Why (measured with benchmarks/serving_probe.py: gc.callbacks timing every collection, a 1 ms
loop-lag probe, the loop thread's stack at each stall, py-spy on every thread):
- a full (generation 2) collection walks every tracked object, and a started service holds
  ~125,000 of them (FastAPI, pydantic, SQLAlchemy, Celery: modules, classes, compiled schemas) that
  never die. Under load at concurrency 32 the objects of the requests in flight survive the young
  collections and count as long-lived, so a full collection ran every ~1.4 s and stopped the
  event loop for 100-500 ms on this VM: every request in flight waited, and that was the p99.
  `gc.freeze()` moves the start-up heap to the permanent generation (never scanned), so a full
  collection walks only what requests created; a higher first threshold makes young collections
  rarer (each costs in proportion to the young objects, so the total stays the same).
- the loop thread waits for the GIL whenever it released it while another thread (the audit
  writer, the thread pool) runs Python: up to the switch interval (5 ms by default) each time.
  A shorter interval bounds each such wait.
"""

from __future__ import annotations

import gc
import sys

YOUNG_THRESHOLD = 20_000  # allocations between young collections (CPython's default: 700)
SWITCH_INTERVAL_S = 0.0005  # longest a thread holding the GIL keeps a waiting one waiting (default 0.005)


def tune_server_process() -> int:
    """Collect once, freeze the survivors, raise the young threshold, shorten the GIL switch; objects frozen."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    return gc.get_freeze_count()
