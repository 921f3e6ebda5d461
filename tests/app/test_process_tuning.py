"""The server process's GC and GIL policy (in a child process: freezing the test runner's heap would leak)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_tuning_freezes_the_startup_heap_and_shortens_the_switch_interval() -> None:
    code = textwrap.dedent("""
        import gc, sys, time
        from app.process_tuning import SWITCH_INTERVAL_S, YOUNG_THRESHOLD, tune_server_process
        from app.main import create_app  # the imports a server holds
        frozen = tune_server_process()
        assert frozen == gc.get_freeze_count() > 10_000, frozen
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD and sys.getswitchinterval() == SWITCH_INTERVAL_S
        t0 = time.perf_counter(); gc.collect(); full_ms = (time.perf_counter() - t0) * 1000
        gc.unfreeze(); t0 = time.perf_counter(); gc.collect(); unfrozen_ms = (time.perf_counter() - t0) * 1000
        print(round(full_ms, 3), round(unfrozen_ms, 3))
        assert full_ms < unfrozen_ms, (full_ms, unfrozen_ms)  # a full collection skips the frozen heap
    """)
    from tests.conftest import ROOT

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
