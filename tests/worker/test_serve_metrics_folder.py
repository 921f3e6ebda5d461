"""Each `serve --workers N` supervisor keeps its processes' metric files in its own folder (an operator probe: a
second service on the same data folder wiped the first one's shared folder; its counters vanished for good)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from worker.serve import metrics_folder


def test_a_supervisor_takes_its_own_folder_and_clears_only_the_dead_ones(tmp_path: Path) -> None:
    root = tmp_path / "prometheus"
    running = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        for pid in (running.pid, int(ended.stdout)):
            (root / str(pid)).mkdir(parents=True)
            (root / str(pid) / "counter_1.db").write_bytes(b"x")
        (root / str(os.getpid())).mkdir()
        (root / str(os.getpid()) / "stale.db").write_bytes(b"x")  # a previous run of this pid

        mine = metrics_folder(root)
        assert mine == root / str(os.getpid()) and list(mine.iterdir()) == []
        assert (root / str(running.pid) / "counter_1.db").exists()  # another service's, running: kept
        assert not (root / ended.stdout.strip()).exists()  # a supervisor that is gone: removed
    finally:
        assert running.stdin is not None
        running.stdin.close()
        running.wait(10)
