"""How the kept restart is chosen, against other choice rules, on the same fits (repeated 5-fold CV).

Usage:
  python benchmarks/restart_selection.py --datasets heart,hepatitis --shuffles 42,43,44 --raw rec.jsonl
  python benchmarks/restart_selection.py --from-raw rec.jsonl

Each fold is fitted once with the defaults (`KFold(5, shuffle=True, random_state=<shuffle>)`,
`random_state=fold`, as benchmarks/accuracy.py); every restart's final network is then scored at
zero temperature on the training and the test rows, with its training routes and its number of
conditions (one JSON line per restart in --raw). The report picks one restart per fold by each rule
and prints the mean test F1 per shuffle and over the shuffles:
- `train`: the best training weighted F1 (what fit does; checked to be the restart fit kept);
- `pessimistic`: the fewest C4.5 pessimistic errors (upper 75 % binomial bound per route, summed);
- `one_se`: CART's one-standard-error rule: among the restarts within sqrt(b (1 - b) / n) of the
  best training F1 b, the one with the fewest conditions;
- `consensus`: the restart whose training-row classes agree most with the restarts' majority vote
  (the member nearest the ensemble, a variance-reduction choice); `consensus_se`: the same among the
  restarts within one standard error of the best training F1 (both need records with `train_classes`);
- `oracle`: the best test F1 (a bound on what any choice rule could reach; not a method).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import beta
from sklearn.model_selection import KFold

sys.path.insert(0, str(Path(__file__).resolve().parent))

from accuracy import NeuRulesClassifier, default_data_dir, list_datasets, load, wf1

Record = dict[str, Any]
CF = 0.25  # C4.5's default confidence for pessimistic error estimates


def restart_records(path: Path, shuffle: int, fold: int) -> list[Record]:
    """Fit one fold; one record per restart: training/test F1, training routes (rows, errors), conditions."""
    X, y = load(path)
    tr, te = list(KFold(5, shuffle=True, random_state=shuffle).split(X))[fold]
    clf = NeuRulesClassifier(random_state=fold).fit(X.iloc[tr], y[tr])
    net = clf.restart_networks_
    with torch.no_grad():
        z_tr, z_te = (
            torch.tensor(clf.encoder_.transform(clf._predict_frame(X.iloc[rows])), dtype=torch.float32)  # noqa: SLF001 -- as predict_network encodes
            for rows in (tr, te)
        )
        sel_tr, cls_tr = net.zero_temperature(z_tr)
        cls_te = net.zero_temperature(z_te)[1]
    truth = np.searchsorted(clf.classes_, y[tr])
    records = []
    for m, kind in enumerate(clf.restart_kinds_):
        routes, pred = sel_tr[m].numpy(), cls_tr[m].numpy()
        records.append(
            {
                "dataset": path.stem,
                "shuffle": shuffle,
                "fold": fold,
                "m": m,
                "kind": kind,
                "n": len(tr),
                "chosen": int(m == clf.restart_),
                "train_f1": wf1(y[tr], clf.classes_[pred]),
                "test_f1": wf1(y[te], clf.classes_[cls_te[m].numpy()]),
                "routes": [
                    [int((routes == j).sum()), int((pred[routes == j] != truth[routes == j]).sum())]
                    for j in np.unique(routes)
                ],
                "conditions": int(((torch.relu(net.weight[m]) * net.pred_mask[m]) > 0).sum()),
                "train_classes": pred.tolist(),
            }
        )
    return records


def pessimistic_errors(record: Record) -> float:
    """C4.5's pessimistic error count of the restart's list: per route n * U_CF(errors, n)."""
    total = 0.0
    for n, e in record["routes"]:
        total += n * (1 - CF ** (1 / n) if e == 0 else float(beta.ppf(1 - CF, e + 1, n - e)))
    return total


def one_se(records: list[Record]) -> Record:
    """CART's one-standard-error rule on the training F1, fewest conditions."""
    best = max(r["train_f1"] for r in records)
    se = math.sqrt(max(best * (1 - best), 1e-12) / records[0]["n"])
    near = [r for r in records if r["train_f1"] >= best - se]
    return min(near, key=lambda r: (r["conditions"], -r["train_f1"], r["m"]))


def vote_agreement(records: list[Record]) -> list[float]:
    """Each restart's share of training rows on which its class is the restarts' majority vote."""
    classes = np.array([r["train_classes"] for r in records])
    votes = np.array([np.bincount(col).argmax() for col in classes.T])
    return [float((row == votes).mean()) for row in classes]


def consensus(records: list[Record]) -> Record:
    """The restart agreeing most with the restarts' majority vote on the training rows (ties: training F1)."""
    agree = vote_agreement(records)
    return max(records, key=lambda r: (agree[records.index(r)], r["train_f1"], -r["m"]))


def consensus_se(records: list[Record]) -> Record:
    """Among the restarts within one standard error of the best training F1, the most consensual."""
    agree = vote_agreement(records)
    best = max(r["train_f1"] for r in records)
    se = math.sqrt(max(best * (1 - best), 1e-12) / records[0]["n"])
    near = [r for r in records if r["train_f1"] >= best - se]
    return max(near, key=lambda r: (agree[records.index(r)], r["train_f1"], -r["m"]))


RULES: dict[str, Callable[[list[Record]], Record]] = {
    "train": lambda rs: max(rs, key=lambda r: (r["train_f1"], -r["m"])),
    "pessimistic": lambda rs: min(rs, key=lambda r: (pessimistic_errors(r), -r["train_f1"], r["m"])),
    "one_se": one_se,
    "consensus": consensus,
    "consensus_se": consensus_se,
    "oracle": lambda rs: max(rs, key=lambda r: r["test_f1"]),
}


def report(records: list[Record]) -> list[str]:
    """Markdown table: per dataset and rule, the mean test F1 per shuffle and over the shuffles."""
    folds: dict[tuple[str, int, int], list[Record]] = defaultdict(list)
    for r in records:
        folds[(r["dataset"], r["shuffle"], r["fold"])].append(r)
    names, shuffles = sorted({k[0] for k in folds}), sorted({k[1] for k in folds})
    rules = {k: v for k, v in RULES.items() if "consensus" not in k or all("train_classes" in r for r in records)}
    score = {(rule, key): pick(rs)["test_f1"] for rule, pick in rules.items() for key, rs in folds.items()}
    assert all(RULES["train"](rs)["chosen"] for rs in folds.values()), "fit kept another restart"

    def mean(rule: str, name: str, s: int) -> float:
        return float(np.mean([v for (r, (d, sh, _)), v in score.items() if r == rule and d == name and sh == s]))

    lines = ["| dataset | " + " | ".join(rules) + " |", "|---" * (len(rules) + 1) + "|"]
    for name in names:
        cells = [[mean(rule, name, s) for s in shuffles] for rule in rules]
        lines.append(
            f"| {name} | " + " | ".join(" / ".join(f"{x:.3f}" for x in c) + f": {np.mean(c):.4f}" for c in cells) + " |"
        )
    for rule in rules:
        per = [float(np.mean([mean(rule, n, s) for n in names])) for s in shuffles]
        lines.append(
            f"mean of the datasets, {rule}: " + ", ".join(f"{x:.4f}" for x in per) + f"; all {np.mean(per):.4f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    """Fit what --raw lacks (2 processes), then print the report."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--datasets", default="")
    ap.add_argument("--shuffles", default="42,43,44")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument(
        "--raw", type=Path, help="JSON lines of per-restart records (appended; fits already there are skipped)"
    )
    ap.add_argument("--from-raw", type=Path, help="only report this file")
    args = ap.parse_args(argv)
    raw = args.from_raw or args.raw
    if not args.from_raw:
        sets = list_datasets(default_data_dir())
        done = {(r["dataset"], r["shuffle"], r["fold"]) for r in _read(raw)}
        todo = [
            (n, s, f) for n in args.datasets.split(",") for s in map(int, args.shuffles.split(",")) for f in range(5)
        ]
        with ProcessPoolExecutor(args.jobs) as pool, raw.open("a") as out:
            futures = [pool.submit(restart_records, sets[n], s, f) for n, s, f in todo if (n, s, f) not in done]
            for fut in as_completed(futures):
                out.writelines(json.dumps(r) + "\n" for r in fut.result())
                out.flush()
    print("\n".join(report(_read(raw))))
    return 0


def _read(path: Path | None) -> list[Record]:
    if not path or not path.exists():
        return []
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [json.loads(line) for line in text.splitlines()]


if __name__ == "__main__":
    raise SystemExit(main())
