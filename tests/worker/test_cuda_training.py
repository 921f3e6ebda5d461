"""On a CUDA machine the worker's training path uses the GPU (the learner's device="auto")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import DATASETS, ROOT

pytestmark = pytest.mark.cuda


def _heart() -> bytes:
    for p in (DATASETS / "heart.csv", Path(os.environ.get("NEURULES_TEST_HEART", ROOT / ".device" / "heart.csv"))):
        if p.exists():
            return p.read_bytes()
    pytest.skip("heart.csv not available")


def test_training_runs_on_cuda_when_available() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from worker.training import train_rule_list

    progress: list[dict] = []
    out = train_rule_list(
        _heart(),
        "target",
        {"n_rules": 10, "epochs": 30, "random_state": 0},
        callback=lambda p: progress.append(p) and False,
    )
    assert out.device.startswith("cuda")
    assert len(progress) == 30 and progress[-1]["epoch"] == 30
    assert 1 <= len(out.document["rules"]) <= 10
    assert out.metrics["holdout"]["n_rows"] == 54
    print(f"CUDA training: {out.seconds:.2f}s, holdout {out.metrics['holdout']}")
