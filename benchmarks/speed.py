"""Training speed: wall time of one CV fold of `adult` and `credit_card_clean`, CPU and CUDA.

Usage: python benchmarks/speed.py [--data-dir DIR] [--datasets adult,credit_card_clean]
       [--devices cpu,cuda] [--repeats N] [--reference PATH] [--out FILE] [--param k=v]
Fold 0 of KFold(5, shuffle=True, random_state=42), 10 rules, default settings, random_state 0.
--reference PATH times another checkout's `models` (e.g. the previous commit, unpacked with
`git archive`) in the same run, alternating with this one, so that a shared machine's load hits
both alike. Prints one markdown table (and the CPU / GPU names and the load average).
Needs torch, numpy, pandas, scikit-learn.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import f1_score
from sklearn.model_selection import KFold

ROOT = Path(__file__).resolve().parents[1]
CODE = os.environ.get("NEURULES_CODE", str(ROOT))
sys.path.insert(0, CODE)
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
    """One tiny fit per device, so one-time costs (lazy imports, CUDA context, kernel caches)
    are not charged to the timed fold."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(256, 3))
    NeuRulesClassifier(n_rules=2, epochs=2, n_restarts=1, random_state=0, device=device).fit(X, X[:, 0] > 0)


def time_fold(path: Path, device: str, params: dict[str, Any]) -> dict[str, Any]:
    """Wall seconds of one fit of fold 0, its held-out weighted F1 and rules."""
    X, y = load(path)
    tr, te = next(iter(KFold(5, shuffle=True, random_state=42).split(X)))
    clf = NeuRulesClassifier(n_rules=10, random_state=0, device=device, **params)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    clf.fit(X.iloc[tr], y[tr])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    secs, cpu = time.perf_counter() - t0, time.process_time() - c0
    f1 = float(f1_score(y[te], clf.predict(X.iloc[te]), average="weighted"))
    phases = " / ".join(f"{v:.2f}" for v in getattr(clf, "timings_", {}).values())
    steps = "; ".join(getattr(clf, "training_steps_", []))
    return {
        "seconds": secs,
        "cpu_seconds": cpu,
        "f1": f1,
        "rules": len(clf.rule_list_.rules),
        "phases": phases,
        "steps": steps,
    }


def measure(sets: dict[str, Path], names: list[str], devices: list[str], params: dict[str, Any]) -> list[dict]:
    """One timed fit per dataset and device (after a warm-up per device)."""
    for dev in devices:
        warm_up(dev)
    return [{"dataset": n, "device": d, **time_fold(sets[n], d, params)} for n in names for d in devices]


def in_child(reference: str, argv: list[str]) -> list[dict]:
    """The same measurement with the reference checkout's code, in a fresh process."""
    env = {**os.environ, "NEURULES_CODE": reference, "PYTHONPATH": reference}
    out = subprocess.run(
        [sys.executable, __file__, *argv, "--json"], env=env, capture_output=True, text=True, check=True
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def table(rows: list[dict]) -> list[str]:
    """Markdown lines for the measured rows."""
    lines = [
        "| code | dataset | device | fit wall seconds (fold 0) | fit CPU seconds of the process | held-out weighted F1 "
        "| rules | encode / train / extract s | training steps ran as |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['code']} | {r['dataset']} | {r['device']} | {r['seconds']:.2f} | {r['cpu_seconds']:.2f} | "
            f"{r['f1']:.3f} | {r['rules']} | {r.get('phases', '')} | {r.get('steps', '')} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the speed benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--datasets", default="adult,credit_card_clean")
    ap.add_argument("--devices", default=None, help="default: cpu, plus cuda when available")
    ap.add_argument("--repeats", type=int, default=1, help="alternating rounds (this code, reference)")
    ap.add_argument("--reference", default=None, help="path of another checkout to time in the same run")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--param", action="append", default=[], help="estimator parameter k=v (python literal)")
    args = ap.parse_args(argv)
    params = parse_params(args.param)
    sets = list_datasets(args.data_dir or default_data_dir())
    devices = args.devices.split(",") if args.devices else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    names = [s.strip() for s in args.datasets.split(",") if s.strip()]
    if args.json:
        print(json.dumps(measure(sets, names, devices, params)))
        return 0
    child = ["--datasets", ",".join(names), "--devices", ",".join(devices)]
    child += [a for p in args.param for a in ("--param", p)] + (
        ["--data-dir", str(args.data_dir)] if args.data_dir else []
    )
    before = os.getloadavg()
    rows: list[dict] = []
    for _ in range(args.repeats):
        rows += [{"code": "this", **r} for r in in_child(str(ROOT), child)]
        if args.reference:
            rows += [{"code": "reference", **r} for r in in_child(args.reference, child)]
    head = [f"CPU: {cpu_name()}", f"load average before: {before}", f"parameters: {params or 'defaults'}"]
    if torch.cuda.is_available():
        head.append(f"GPU: {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    lines = [*head, "", *table(rows), "", f"load average after: {os.getloadavg()}"]
    print("\n".join(lines), flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
