"""Each `serve --workers N` supervisor keeps its processes' metric files in its own folder (an operator probe: a
second service on the same data folder wiped the first one's shared folder; its counters vanished for good)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from worker.serve import metrics_folder


def test_a_supervisor_takes_its_own_folder_and_clears_only_the_dead_ones(tmp_path: Path) -> None:
    root = tmp_path / "prometheus"
    running = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    try:
        host = socket.gethostname()
        folders = [f"{host}-{running.pid}", f"{host}-{int(ended.stdout)}", "other-host-1", f"{host}-{os.getpid()}"]
        for name in folders:
            (root / name).mkdir(parents=True)
            (root / name / "counter_1.db").write_bytes(b"x")

        mine = metrics_folder(root)
        assert mine == root / f"{host}-{os.getpid()}" and list(mine.iterdir()) == []  # a previous run of this pid
        assert (root / f"{host}-{running.pid}" / "counter_1.db").exists()  # another service's, running: kept
        assert (root / "other-host-1" / "counter_1.db").exists()  # another container's (its own pid 1): kept
        assert not (root / f"{host}-{int(ended.stdout)}").exists()  # a supervisor of this host that is gone
    finally:
        assert running.stdin is not None
        running.stdin.close()
        running.wait(10)
