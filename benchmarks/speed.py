"""Training speed: wall time of one CV fold of `adult` and `credit_card_clean`, CPU and CUDA.

Usage: python benchmarks/speed.py [--data-dir DIR] [--datasets adult,credit_card_clean]
       [--devices cpu,cuda] [--out FILE]
Fold 0 of KFold(5, shuffle=True, random_state=42), 10 rules, default settings, random_state 0.
Prints one markdown table (and the CPU / GPU names). Needs torch, numpy, pandas, scikit-learn.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
from sklearn.metrics import f1_score
from sklearn.model_selection import KFold

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch
from accuracy import default_data_dir, list_datasets, load, parse_params

from models import NeuRulesClassifier


def cpu_name() -> str:
    """CPU model name and core count."""
    name = platform.processor() or "cpu"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} cores visible; fit uses one torch thread by default)"


def warm_up(device: str) -> None:
    """One tiny fit per device, so one-time costs (lazy imports inside torch.optim, CUDA context,
    kernel caches) are not charged to the timed fold."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, 3))
    NeuRulesClassifier(n_rules=2, epochs=2, n_restarts=1, random_state=0, device=device).fit(X, X[:, 0] > 0)


def time_fold(path: Path, device: str, repeats: int, params: dict) -> tuple[float, float, int, dict]:
    """(best wall seconds of fit, held-out weighted F1, rules, phase seconds) for fold 0."""
    X, y = load(path)
    tr, te = next(iter(KFold(5, shuffle=True, random_state=42).split(X)))
    best = float("inf")
    clf = None
    phases: dict = {}
    for _ in range(repeats):
        clf = NeuRulesClassifier(n_rules=10, random_state=0, device=device, **params)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        clf.fit(X.iloc[tr], y[tr])
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        if secs < best:
            best, phases = secs, dict(clf.timings_)
    assert clf is not None
    f1 = f1_score(y[te], clf.predict(X.iloc[te]), average="weighted")
    return best, float(f1), len(clf.rule_list_.rules), phases


def main(argv: list[str] | None = None) -> int:
    """Run the speed benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--datasets", default="adult,credit_card_clean")
    ap.add_argument("--devices", default=None, help="default: cpu, plus cuda when available")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        help="estimator parameter k=v (python literal)",
    )
    args = ap.parse_args(argv)
    params = parse_params(args.param)
    sets = list_datasets(args.data_dir or default_data_dir())
    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    lines = [f"CPU: {cpu_name()}", f"parameters: {params or 'defaults'}"]
    if torch.cuda.is_available():
        lines.append(f"GPU: {torch.cuda.get_device_name(0)}")
        # warm the CUDA context so that its start-up is not charged to the first fit
        torch.zeros(1, device="cuda").sum().item()
    lines += [
        "",
        "| dataset | device | fit seconds (fold 0) | held-out weighted F1 | rules "
        "| of which: prepare / train / extract / check s |",
        "|---|---|---|---|---|---|",
    ]
    for line in lines:
        print(line, flush=True)
    for dev in devices:
        warm_up(dev)
    results: dict[tuple[str, str], float] = {}
    for name in [s.strip() for s in args.datasets.split(",") if s.strip()]:
        for dev in devices:
            secs, f1, rules, ph = time_fold(sets[name], dev, args.repeats, params)
            results[(name, dev)] = secs
            split = " / ".join(f"{ph.get(k, 0.0):.2f}" for k in ("prepare", "train", "extract", "check"))
            line = f"| {name} | {dev} | {secs:.2f} | {f1:.3f} | {rules} | {split} |"
            lines.append(line)
            print(line, flush=True)
    for name in [s.strip() for s in args.datasets.split(",") if s.strip()]:
        if (name, "cpu") in results and (name, "cuda") in results:
            line = f"{name}: CUDA is {results[(name, 'cpu')] / results[(name, 'cuda')]:.1f}x the CPU speed"
            lines.append(line)
            print(line, flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
