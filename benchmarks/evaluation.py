"""Evaluation and counterfactual speed: where the time of scoring a large labelled file goes.

Usage: python benchmarks/evaluation.py [--rows 1000000] [--rules 10] [--records 200] [--seed 0]
A synthetic table (10 numeric + 3 categorical features, a binary target, a 2-value slice column)
and a random rule list over it. Prints one markdown table of wall times per stage of
`app.services.evaluation.evaluate_table` (CSV parsing included for reference) and the mean and
worst time of `models.counterfactual.counterfactual` per record. numpy only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.services.csvdata import parse_csv, write_csv
from app.services.evaluation import code_labels, evaluate_table, score, slices, typed_records
from models.counterfactual import counterfactual
from models.rulelist import Condition, Feature, RuleList

NUMERIC = [f"x{i}" for i in range(10)]
CATEGORICAL = ["c0", "c1", "c2"]
LEVELS = ["a", "b", "c", "d"]


def random_rule_list(n_rules: int, rng: np.random.Generator) -> RuleList:
    """A rule list of 1-3 random conditions per rule, measured on 2,000 random rows."""
    features = [Feature(n, "numeric", fill_value=0.5, min=0.0, max=1.0) for n in NUMERIC]
    features += [Feature(n, "categorical", categories=tuple(LEVELS)) for n in CATEGORICAL]
    rules = []
    for _ in range(n_rules):
        conds = []
        for name in rng.choice(NUMERIC + CATEGORICAL, size=int(rng.integers(1, 4)), replace=False):
            if name in NUMERIC:
                t = round(float(rng.uniform(0.2, 0.8)), 3)
                conds.append(
                    Condition(str(name), "between", low=t)
                    if rng.random() < 0.5
                    else Condition(str(name), "between", high=t)
                )
            else:
                conds.append(Condition(str(name), "in", values=tuple(rng.choice(LEVELS, 2, replace=False).tolist())))
        rules.append(conds)
    X, y = columns(2000, rng)
    return RuleList.build(classes=[0, 1], features=features, rules=rules, X=X, y=y)


def columns(n: int, rng: np.random.Generator) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Random feature columns and a label tied to two of them."""
    X: dict[str, np.ndarray] = {n_: rng.random(n).round(3) for n_ in NUMERIC}
    X.update({n_: rng.choice(LEVELS, n).astype(object) for n_ in CATEGORICAL})
    y = ((X["x0"] > 0.5) ^ (rng.random(n) < 0.2)).astype(np.int64)
    return X, y


def timed(label: str, rows: list[tuple[str, float]], fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Run fn, append (label, seconds) to rows, return its result."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    rows.append((label, time.perf_counter() - t0))
    return out


def main() -> None:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rules", type=int, default=10)
    ap.add_argument("--records", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    rl = random_rule_list(args.rules, rng)
    X, y = columns(args.rows, rng)
    header = [*NUMERIC, *CATEGORICAL, "target", "group"]
    cells = [X[n].tolist() for n in NUMERIC + CATEGORICAL] + [y.tolist(), rng.choice(["f", "m"], args.rows).tolist()]
    data = write_csv(header, zip(*cells, strict=True)).encode()
    stages: list[tuple[str, float]] = []
    table = timed("parse_csv (not part of evaluation)", stages, parse_csv, data)
    records = timed("typed_records (serving.table_records)", stages, typed_records, rl, table)
    labels = timed("code_labels (target -> classes)", stages, code_labels, rl.classes, table.columns["target"])
    ids = timed("RuleList.apply", stages, rl.apply, records)
    timed("score (metrics, confusion, calibration, rules)", stages, score, rl, ids, labels)
    from app.services.evaluation import decisions

    mask = labels.scored
    timed(
        "slices (2 groups)",
        stages,
        slices,
        rl,
        "group",
        table.columns["group"],
        labels.codes[mask],
        decisions(rl, ids[mask]),
    )
    timed("evaluate_table, all of the above but parsing", stages, evaluate_table, rl, table, "target", slice_by="group")
    per_record = []
    sample = [{n: X[n][i] for n in NUMERIC + CATEGORICAL} for i in range(args.records)]
    for rec in sample:
        t0 = time.perf_counter()
        counterfactual(rl, rec)
        per_record.append(time.perf_counter() - t0)
    print(f"rows: {args.rows:,}, rules: {args.rules}, features: {len(NUMERIC) + len(CATEGORICAL)}\n")
    print("| stage | seconds |\n|---|---:|")
    for label, s in stages:
        print(f"| {label} | {s:.2f} |")
    ms = np.asarray(per_record) * 1000
    print(f"| counterfactual per record, mean / max over {args.records} (ms) | {ms.mean():.2f} / {ms.max():.2f} |")


if __name__ == "__main__":
    main()
