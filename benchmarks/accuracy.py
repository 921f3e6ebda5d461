"""5-fold CV accuracy benchmark of NeuRules against the paper and a ten-rule CART tree.

Usage: python benchmarks/accuracy.py [--data-dir DIR] [--datasets a,b] [--out FILE] [--rules 10]
Datasets: every `*.csv` / `*.csv.gz` in the data dir (default: env NEURULES_DATASETS or
../shared/datasets next to the repository), last column `target`. Prints one markdown table.
Needs torch, numpy, pandas and scikit-learn only.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import f1_score
from sklearn.model_selection import KFold
from sklearn.tree import DecisionTreeClassifier

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from models import NeuRulesClassifier


def default_data_dir() -> Path:
    """Dataset folder: $NEURULES_DATASETS or ../shared/datasets beside the repository."""
    env = os.environ.get("NEURULES_DATASETS")
    if env:
        return Path(env)
    for cand in (ROOT.parent / "shared" / "datasets", ROOT / "shared" / "datasets"):
        if cand.is_dir():
            return cand
    return ROOT.parent / "shared" / "datasets"


def list_datasets(data_dir: Path) -> dict[str, Path]:
    """name -> path for every CSV in the folder."""
    out = {}
    for p in sorted(data_dir.iterdir()):
        if p.name.endswith(".csv") or p.name.endswith(".csv.gz"):
            out[p.name.split(".csv")[0]] = p
    return out


def load(path: Path) -> tuple[pd.DataFrame, np.ndarray]:
    """Features and target (last column) of one dataset."""
    df = pd.read_csv(path)
    y = df.iloc[:, -1].to_numpy()
    return df.iloc[:, :-1], y


def tree_matrix(X: pd.DataFrame, train_idx: np.ndarray) -> np.ndarray:
    """Numeric matrix for the CART baseline: numeric columns as is (median fill), others one-hot."""
    num = X.select_dtypes(include=[np.number])
    other = X.drop(columns=num.columns)
    parts = [num.fillna(num.iloc[train_idx].median())]
    if other.shape[1]:
        parts.append(pd.get_dummies(other.astype(str), dtype=float))
    return pd.concat(parts, axis=1).to_numpy(dtype=float)


def load_targets() -> pd.DataFrame | None:
    """../shared/targets.csv when present."""
    for cand in (
        ROOT.parent / "shared" / "targets.csv",
        ROOT / "shared" / "targets.csv",
    ):
        if cand.exists():
            return pd.read_csv(cand).set_index("dataset")
    return None


def run_dataset(name: str, path: Path, n_rules: int, params: dict) -> dict:
    """5-fold CV of NeuRules and CART-11 on one dataset."""
    X, y = load(path)
    kf = KFold(5, shuffle=True, random_state=42)
    ours, tree, rules, secs, agree = [], [], [], [], []
    for fold, (tr, te) in enumerate(kf.split(X)):
        clf = NeuRulesClassifier(n_rules=n_rules, random_state=fold, **params)
        t0 = time.perf_counter()
        clf.fit(X.iloc[tr], y[tr])
        secs.append(time.perf_counter() - t0)
        ours.append(f1_score(y[te], clf.predict(X.iloc[te]), average="weighted"))
        rules.append(len(clf.rule_list_.rules))
        agree.append(clf.train_agreement_)
        M = tree_matrix(X, tr)
        dt = DecisionTreeClassifier(max_leaf_nodes=11, random_state=0).fit(M[tr], y[tr])
        tree.append(f1_score(y[te], dt.predict(M[te]), average="weighted"))
    return {
        "dataset": name,
        "f1": float(np.mean(ours)),
        "f1_std": float(np.std(ours)),
        "cart": float(np.mean(tree)),
        "rules": float(np.mean(rules)),
        "secs": float(np.mean(secs)),
        "agree": float(np.min(agree)),
    }


def fmt(x: float | None) -> str:
    """Three decimals or blank."""
    return "" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.3f}"


def parse_params(pairs: list[str]) -> dict:
    """`k=v` command-line pairs (v a Python literal) as estimator parameters."""
    import ast

    params = {}
    for kv in pairs:
        k, v = kv.split("=", 1)
        params[k] = ast.literal_eval(v)
    return params


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--datasets", default=None, help="comma-separated subset")
    ap.add_argument("--rules", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--param",
        action="append",
        default=[],
        help="extra estimator parameter k=v (python literal)",
    )
    args = ap.parse_args(argv)
    params = parse_params(args.param)
    data_dir = args.data_dir or default_data_dir()
    sets = list_datasets(data_dir)
    if args.datasets:
        wanted = [s.strip() for s in args.datasets.split(",") if s.strip()]
        missing = [w for w in wanted if w not in sets]
        if missing:
            ap.error(f"unknown datasets {missing}; have {sorted(sets)}")
        sets = {w: sets[w] for w in wanted}
    targets = load_targets()
    header = (
        "| dataset | NeuRules F1 (ours) | paper NeuRules | target | CART-11 | rules used | fit s/fold "
        "| soft/crisp agreement |\n"
        "|---|---|---|---|---|---|---|---|"
    )
    lines = [header]
    print(header, flush=True)
    for name, path in sets.items():
        r = run_dataset(name, path, args.rules, params)
        paper = target = None
        if targets is not None and name in targets.index:
            paper = targets.loc[name, "paper_neurules"]
            target = targets.loc[name, "target"]
        line = (
            f"| {name} | {r['f1']:.3f} ± {r['f1_std']:.3f} | {fmt(paper)} | {fmt(target)} | {r['cart']:.3f} | "
            f"{r['rules']:.1f} | {r['secs']:.1f} | {100 * r['agree']:.2f}% |"
        )
        lines.append(line)
        print(line, flush=True)
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
