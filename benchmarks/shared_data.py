"""Where the shared datasets are, for the benchmarks and the tests alike (they are never copied into the repository)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def shared_datasets() -> Path:
    """$NEURULES_DATASETS, $NEURULES_SHARED/datasets (a worktree), ../shared beside the repository, else ../shared
    beside the checkout this one was cloned from (a fresh clone in a temporary folder)."""
    if os.environ.get("NEURULES_DATASETS"):
        return Path(os.environ["NEURULES_DATASETS"])
    if os.environ.get("NEURULES_SHARED"):
        return Path(os.environ["NEURULES_SHARED"]) / "datasets"
    beside = ROOT.parent / "shared" / "datasets"
    if beside.is_dir():
        return beside
    origin = subprocess.run(
        ["git", "-C", str(ROOT), "config", "--get", "remote.origin.url"], capture_output=True, text=True, check=False
    ).stdout.strip()
    cloned_from = Path(origin).parent / "shared" / "datasets" if origin.startswith("/") else None
    return cloned_from if cloned_from is not None and cloned_from.is_dir() else beside
