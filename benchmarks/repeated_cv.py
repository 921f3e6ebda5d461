"""Repeated 5-fold CV (several outer shuffles) of NeuRules variants, paired, on chosen datasets.

Usage:
  python benchmarks/repeated_cv.py --datasets heart,crx --shuffles 42,43,44 --variants baseline,mc_by_n --jobs 2

Folds: KFold(5, shuffle=True, random_state=<shuffle>), `random_state=fold` as in accuracy.py.
A variant maps the number of training rows n to estimator parameters (the same rule for every
dataset). Prints per dataset and variant the mean weighted F1 per shuffle and over the shuffles,
and the change against the first variant; --cart adds CART-11 on the same folds. --raw appends
one JSON line per finished fit; --from-raw FILE... only reports such files (no fits).
Each record also has the seeding kind of the kept restart ("kind").
Variants (issue 7, round 3; none adopted, see benchmarks/RESULTS.md): `mc_by_n`, `rows_floor`, and
`rule_rows`, which needs `git apply benchmarks/patches/min_rule_rows.diff` (the `min_rule_rows`
parameter is not in `models/`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.model_selection import KFold

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import NeuRulesClassifier, default_data_dir, list_datasets, load, tree_matrix, wf1
from sklearn.tree import DecisionTreeClassifier


def mc_by_n(n: int) -> dict[str, Any]:
    """At most round(log2(n / 31)) conditions per rule, between 2 and 6 (6 from about 1,400 rows)."""
    return {"max_conditions": int(min(6, max(2, round(math.log2(n / 31)))))}


def rows_floor(n: int) -> dict[str, Any]:
    """min_support at least 20 training rows (unchanged 0.05 from 400 rows on)."""
    return {"min_support": max(0.05, 20.0 / n)}


def rule_rows(n: int) -> dict[str, Any]:
    """After pruning, a rule must decide at least round(10 * (1 - n / 2000)) training rows (1 from 1,900 rows)."""
    return {"min_rule_rows": int(max(1, round(10 * (1 - n / 2000))))}


def tune_half(n: int) -> dict[str, Any]:
    """Fine-tuning of the pruned structure for half the annealed stage's steps (default a fifth)."""
    return {"tune_fraction": 0.5}


def steps_450(n: int) -> dict[str, Any]:
    """450 optimiser steps in the annealed stage (default 300)."""
    return {"target_steps": 450}


VARIANTS: dict[str, Callable[[int], dict[str, Any]]] = {
    "baseline": lambda n: {},
    "tune_half": tune_half,
    "steps_450": steps_450,
    "mc_by_n": mc_by_n,
    "rows_floor": rows_floor,
    "rule_rows": rule_rows,
}


def raw_text(path: Path) -> str:
    """A raw records file's text, gzip-compressed (`.gz`) or not."""
    return gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()


def run_one(path: Path, shuffle: int, fold: int, variant: str) -> dict[str, Any]:
    """Fit one fold of one outer shuffle with one variant; test F1 and list size."""
    X, y = load(path)
    tr, te = list(KFold(5, shuffle=True, random_state=shuffle).split(X))[fold]
    params = VARIANTS[variant](len(tr))
    clf = NeuRulesClassifier(random_state=fold, **params).fit(X.iloc[tr], y[tr])
    served = clf.predict(X.iloc[te])
    sizes = [len(r.conditions) for r in clf.rule_list_.rules]
    return {
        "f1": wf1(y[te], served),
        "conditions": sum(sizes),
        "agree": float(np.mean(clf.predict_network(X.iloc[te]) == served)),
        "params": params,
        "kind": clf.rule_list_.metadata.get("restart_kind"),
    }


def cart_f1(path: Path, shuffle: int) -> float:
    """Mean weighted F1 of CART-11 (as in accuracy.py) over the 5 folds of one outer shuffle."""
    X, y = load(path)
    scores = []
    for tr, te in KFold(5, shuffle=True, random_state=shuffle).split(X):
        M = tree_matrix(X, tr)
        tree = DecisionTreeClassifier(max_leaf_nodes=11, random_state=0).fit(M[tr], y[tr])
        scores.append(wf1(y[te], tree.predict(M[te])))
    return float(np.mean(scores))


def cart_lines(sets: dict[str, Path], names: list[str], shuffles: list[int]) -> list[str]:
    """CART-11 per dataset: mean F1 per shuffle and over the shuffles."""
    lines = [
        "| dataset | CART-11 | " + " | ".join(f"shuffle {s}" for s in shuffles) + " | mean |",
        "|---" * (len(shuffles) + 3) + "|",
    ]
    for name in names:
        per = [cart_f1(sets[name], s) for s in shuffles]
        lines.append(f"| {name} | CART-11 | " + " | ".join(f"{x:.3f}" for x in per) + f" | {np.mean(per):.4f} |")
    return lines


def report(records: list[dict[str, Any]], names: list[str], shuffles: list[int], variants: list[str]) -> list[str]:
    """Markdown table: mean F1 per shuffle and over shuffles, per dataset and variant."""

    def mean(name: str, v: str, s: int | None) -> float:
        vals = [
            r["f1"] for r in records if r["dataset"] == name and r["variant"] == v and (s is None or r["shuffle"] == s)
        ]
        return float(np.mean(vals)) if vals else float("nan")

    head = (
        "| dataset | variant | "
        + " | ".join(f"shuffle {s}" for s in shuffles)
        + " | mean | Δ vs "
        + variants[0]
        + " | conditions |"
    )
    lines = [head, "|---" * (len(shuffles) + 5) + "|"]
    for name in names:
        for v in variants:
            per = [mean(name, v, s) for s in shuffles]
            delta = np.mean(per) - np.mean([mean(name, variants[0], s) for s in shuffles])
            cond = np.mean([r["conditions"] for r in records if r["dataset"] == name and r["variant"] == v] or [np.nan])
            lines.append(
                f"| {name} | {v} | "
                + " | ".join(f"{x:.3f}" for x in per)
                + f" | {np.mean(per):.4f} | {delta:+.4f} | {cond:.1f} |"
            )
    lines.append("")
    for v in variants:
        per = [float(np.mean([mean(n, v, s) for n in names])) for s in shuffles]
        lines.append(
            f"mean over datasets, {v}: "
            + ", ".join(f"{s}: {x:.4f}" for s, x in zip(shuffles, per, strict=True))
            + f"; all {np.mean(per):.4f}"
        )
    for v in variants:
        agree = [r["agree"] for r in records if r["variant"] == v]
        lines.append(f"network vs served list on test rows, {v}: min {100 * min(agree):.2f}% over {len(agree)} fits")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run every (shuffle, fold, dataset, variant) fit and print the paired table."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", required=True)
    ap.add_argument("--shuffles", default="42,43,44")
    ap.add_argument("--variants", default="baseline,mc_by_n")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--raw", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--from-raw", type=Path, nargs="*", default=None, help="only report these raw files (no fits)")
    ap.add_argument("--cart", action="store_true", help="also print CART-11 per shuffle")
    args = ap.parse_args(argv)
    sets = list_datasets(default_data_dir())
    names = [s.strip() for s in args.datasets.split(",")]
    shuffles = [int(s) for s in args.shuffles.split(",")]
    variants = [v.strip() for v in args.variants.split(",")]
    records: list[dict[str, Any]] = []
    if args.from_raw is not None:
        records = [json.loads(line) for raw in args.from_raw for line in raw_text(raw).splitlines() if line]
    tasks = [(sets[n], s, f, v) for s in shuffles for f in range(5) for n in names for v in variants]
    if args.from_raw is not None:
        tasks = []
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_one, *t): t for t in tasks}
        for fut in as_completed(futures):
            path, s, f, v = futures[fut]
            rec = {"dataset": path.name.split(".csv")[0], "shuffle": s, "fold": f, "variant": v, **fut.result()}
            records.append(rec)
            if args.raw is not None:
                with args.raw.open("a") as fh:
                    fh.write(json.dumps(rec) + "\n")
    lines = report(records, names, shuffles, variants)
    if args.cart:
        lines += ["", *cart_lines(sets, names, shuffles)]
    print("\n".join(lines), flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
