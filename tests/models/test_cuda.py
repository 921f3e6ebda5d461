"""Training on CUDA (captured as CUDA graphs) gives the rule list the CPU gives (skips without a GPU)."""

from __future__ import annotations

import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from models import NeuRulesClassifier, training

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


@pytest.mark.parametrize("name", ["heart", "crx"])
def test_cuda_fit_agrees_with_cpu(name: str, load_dataset) -> None:  # type: ignore[no-untyped-def]
    X, y = load_dataset(name)
    params = {"n_rules": 10, "random_state": 0, "target_steps": 300, "n_restarts": 2}
    gpu = NeuRulesClassifier(device="cuda", **params).fit(X, y)
    cpu = NeuRulesClassifier(device="cpu", **params).fit(X, y)
    assert gpu.rule_list_.to_dict()["metadata"]["device"].startswith("cuda")
    assert np.array_equal(gpu.predict_network(X, stage="final"), gpu.predict(X))  # the list is the GPU network
    same = gpu.rule_list_.to_dict()["rules"] == cpu.rule_list_.to_dict()["rules"]
    agree = float(np.mean(gpu.predict(X) == cpu.predict(X)))
    print(f"{name}: identical rule lists {same}, prediction agreement {agree:.4f}")
    # floating point differs between devices, so the lists may differ slightly; their decisions
    # on the training rows must be (nearly) the same, and as accurate
    assert same or agree >= 0.9
    assert gpu.score(X, y) >= cpu.score(X, y) - 0.03


def test_graph_capture_trains_as_eager_steps_do(load_dataset, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    X, y = load_dataset("crx")
    params = {"n_rules": 10, "random_state": 0, "target_steps": 300, "n_restarts": 4, "device": "cuda"}
    t0 = time.perf_counter()
    graphed = NeuRulesClassifier(**params).fit(X, y)
    t1 = time.perf_counter()
    monkeypatch.setattr(training, "CUDA_GRAPHS", False)
    eager = NeuRulesClassifier(**params).fit(X, y)
    t2 = time.perf_counter()
    agree = float(np.mean(graphed.predict(X) == eager.predict(X)))
    print(f"graphs {t1 - t0:.2f} s ({graphed.training_steps_}), eager {t2 - t1:.2f} s, agreement {agree:.4f}")
    assert all(s == "cuda graph" for s in graphed.training_steps_), graphed.training_steps_
    assert all(s.startswith("eager") for s in eager.training_steps_)
    assert agree >= 0.9 and graphed.score(X, y) >= eager.score(X, y) - 0.03


def test_device_auto_picks_cuda() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    clf = NeuRulesClassifier(n_rules=3, target_steps=50, random_state=0).fit(X, y)
    assert clf.rule_list_.to_dict()["metadata"]["device"].startswith("cuda")
