"""Command line: `neurules fit data.csv --target COL --out model.json` and `neurules predict`."""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from models import csvtext
from models.rulelist import RuleList, csv_cell_value, decision_table

MAX_RULES = 200  # as the service's NEURULES_MAX_RULES default: more rules than anyone reads, and memory grows with it
MOSTLY_NUMBERS = 0.9  # a column with at least this share of numbers among its values: its other cells are named
MANY_CLASSES = 20  # a target with more classes than this, and than a tenth of the rows, is named as maybe continuous


def _labels(text: pd.Series) -> np.ndarray:
    """The target (read as text) as the service reads it: whole numbers exact as floats (|v| < 2**53) as
    integers, equal values as one class (`7`, `07`, `7.0`); any other column as written (`1.5`, `yes`)."""
    known = text.dropna()
    values = pd.to_numeric(known, errors="coerce")
    if len(known) and values.notna().all():
        v = values.to_numpy(dtype=np.float64)
        if np.isfinite(v).all() and (v == np.floor(v)).all() and (np.abs(v) < 2**53).all():
            out = np.full(len(text), np.nan, dtype=object)
            out[text.notna().to_numpy()] = v.astype(np.int64)
            return out
    return np.asarray(text.to_numpy(dtype=object))


def _file_bytes(path: str) -> bytes:
    """The file's bytes, gunzipped when it is gzip-compressed (`.csv.gz`, as the service takes it)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise ValueError(f"not a valid gzip file ({e})") from None
    return raw


@dataclass
class _Records:
    """A CSV's header (names stripped), its data records, and the line each record starts on."""

    header: list[str]
    rows: list[list[str]]
    lines: list[int]


def _records(text: str, sep: str) -> _Records:
    """The records as the service's reader takes them (`csv` strict, every row as long as the header, no NUL,
    empty lines skipped, a header and at least one row), with each record's first line for messages."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True)
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    read = 0  # lines read before the record at hand: it starts on line read + 1
    try:
        for record in reader:
            start, read = read + 1, reader.line_num
            if not record and header is None:  # the header must be line 1, as the service reads it
                _header([])
            if not record:
                continue
            if any("\x00" in cell for cell in record):
                raise ValueError(f"line {start}: contains a NUL character (byte 0); is the file a text CSV?")
            if header is None:
                header = _header([name.strip() for name in record])
                continue
            if len(record) != len(header):
                raise ValueError(
                    f"row {len(rows)} (line {start}): {len(record)} fields, but the header has {len(header)} columns"
                )
            rows.append(record)
            lines.append(start)
    except csv.Error as e:
        raise ValueError(f"line {reader.line_num}: {e}") from None
    if header is None:
        raise ValueError("the file is empty: no header line")
    if not rows:
        raise ValueError("the file has a header but no data rows")
    return _Records(header, rows, lines)


def _header(names: list[str]) -> list[str]:
    """The header's names, checked as the service checks them (`csvtext.header_problem`)."""
    problem = csvtext.header_problem(names)
    if problem is not None:
        raise ValueError(problem[1])
    return names


def _decimal_commas(cells: pd.Series, name: str, lines: list[int]) -> pd.Series:
    """A column of a file not separated by commas with its decimal commas read (`csvtext`, as the service does)."""
    values = [v if isinstance(v, str) else None for v in cells]
    try:
        fixed = csvtext.normalise_column(name, values, lines.__getitem__)
    except csvtext.DecimalSeparatorError as e:
        raise ValueError(e.message) from None
    return cells if fixed is values else pd.Series(fixed, index=cells.index, dtype=object)


def _numbers(cells: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """The cells' numbers as the service reads them (NaN where none) and which cells are numbers (`csvtext.number`:
    `3_2` or other scripts' digits are no number; `nan` is one, read as missing)."""
    parsed = [csvtext.number(v) if isinstance(v, str) else None for v in cells]
    values = np.array([np.nan if p is None else p for p in parsed], dtype=np.float64)
    return values, np.array([p is not None for p in parsed], dtype=bool)


def _read_csv(
    path: str, text: frozenset[str] = frozenset(), commas_in: Callable[[str], bool] = lambda name: True
) -> pd.DataFrame:
    """Read a CSV once (a pipe cannot be read again) as the service reads one: gzip-compressed or not, separated by
    `,`, `;`, tab or `|` (`csvtext.sniff_delimiter`), records as strict as the service's (`_records`), names and
    cells without the blanks around them, the missing-value tokens (`csv_cell_value`) missing, decimal commas read
    where the separator is not a comma (in the columns `commas_in` names: all of a training file, as the service's
    upload; a model's numeric features of a file to decide, as its predict.csv, which refuses nothing in a column
    it does not read), a column of numbers numeric (but those in `text`); duplicate header names refused. So a
    document `fit` writes imports into the service, whose import refuses levels such as `" Male"` or `"?"` that no
    CSV cell it reads can hold."""
    try:
        content = csvtext.utf8_text(_file_bytes(path))
        sep = csvtext.sniff_delimiter(content[:65536])
        table = _records(content, sep)
    except ValueError as e:  # `predict` reads two files: say which one
        raise ValueError(f"{path}: {e}") from None
    df = pd.DataFrame(table.rows, columns=table.header, dtype=object)
    for name in df.columns:
        cells = df[name].map(lambda v: csv_cell_value(v) if isinstance(v, str) else v)
        if sep != "," and commas_in(name):
            cells = _decimal_commas(cells, name, table.lines)
        values, is_number = _numbers(cells)
        numeric = name not in text and bool((is_number | cells.isna().to_numpy()).all())  # all missing: numeric
        df[name] = pd.Series(values, index=cells.index) if numeric else cells
    df.attrs["lines"] = list(table.lines)  # each row's first line, for messages
    df.attrs["sep"] = sep
    return df


def _check_numbers(rl: RuleList, df: pd.DataFrame) -> None:
    """ValueError naming the first cell of a numeric feature, in row order, that is no number as a CSV holds one or
    an infinite one, as the service refuses them."""
    for feature in rl.features:
        if feature.type != "numeric" or feature.name not in df.columns:
            continue
        column = df[feature.name]
        if pd.api.types.is_numeric_dtype(column):
            number, values = np.ones(len(column), dtype=bool), column.to_numpy(dtype=np.float64)
        else:
            values, number = _numbers(column)
        bad = np.flatnonzero(column.notna().to_numpy() & (~number | np.isinf(values)))
        if len(bad):
            row = int(bad[0])
            what = "a finite number" if number[row] else "a number"
            lines = df.attrs.get("lines")
            line = f" on line {lines[row]}" if lines else ""  # the service's message names the line too
            raise ValueError(
                f"column {feature.name!r}: expected {what}, got {str(column.iloc[row])!r} (row {row}){line}; "
                "use an empty cell or NA for a missing value"
            )


def _load_model(path: str) -> RuleList:
    """The rule list stored at `path`; ValueError for a document that is no rule list."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except RecursionError:
        raise ValueError(f"{path}: the JSON is nested too deeply to be a rule-list document") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a JSON rule-list document ({e}); the model comes first, then the CSV") from None
    try:
        return RuleList.from_dict(doc)
    except ValueError as e:
        raise ValueError(f"{path}: not a rule-list document: {e}") from None


def _check_out(path: str) -> None:
    """ValueError, before any training, for an output path that cannot be written (the trained list was lost)."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"--out {path}: is a directory")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ValueError(f"--out {path}: the folder {str(folder)!r} {what}")
    if not os.access(out if out.exists() else folder, os.W_OK):
        raise ValueError(f"--out {path}: not writable")


def _name_stray_text(df: pd.DataFrame, target: str) -> None:
    """A note for each column read as categories although nearly all its values are numbers (a few stray cells
    such as `oops` or `n/a?` make the whole column categorical: `b in {1, 4}` instead of a threshold)."""
    for name in df.columns:
        cells = df[name]
        if name == target or pd.api.types.is_numeric_dtype(cells):
            continue
        known = cells[cells.notna()]
        _, is_number = _numbers(known)
        if df.attrs.get("sep", ",") != ",":  # decimal commas are numbers there (a stray cell kept them as text)
            is_number |= np.array([bool(csvtext.DECIMAL_COMMA.match(v)) for v in known], dtype=bool)
        if len(known) and MOSTLY_NUMBERS <= is_number.mean() < 1:
            rows = np.flatnonzero(cells.notna().to_numpy())[~is_number]
            shown = ", ".join(
                f"{known.iloc[i]!r} (row {int(r)})"
                for i, r in zip(np.flatnonzero(~is_number)[:3], rows[:3], strict=True)
            )
            print(
                f"note: column {name!r} is read as categories: {int((~is_number).sum())} of {len(known)} values are "
                f"not numbers ({shown}); make them empty or NA for a numeric column",
                file=sys.stderr,
            )


def _name_many_classes(y: np.ndarray, target: str) -> None:
    """A note when the target looks continuous or like an id: a rule list predicts one of its classes."""
    k = len(set(y.tolist()))
    if k > MANY_CLASSES and k > len(y) / 10:
        print(
            f"note: the target {target!r} has {k} distinct values in {len(y)} rows; a rule list predicts one of them "
            "as a class: is it a continuous column or an id?",
            file=sys.stderr,
        )


def _training_rows(df: pd.DataFrame, target: str) -> tuple[pd.DataFrame, np.ndarray]:
    """Features and labels of the rows with a target (as the service trains: the others left out, and said so)."""
    y = _labels(df[target])
    known = ~pd.isna(y)
    if not known.all():
        print(f"note: {int((~known).sum())} row(s) without a {target!r} value left out", file=sys.stderr)
    y, X = y[known], df.drop(columns=[target])[known].reset_index(drop=True)
    if len(y) and all(isinstance(v, int | np.integer) for v in y):
        y = y.astype(np.int64)
    return X, y


def _train(clf: Any, X: pd.DataFrame, y: np.ndarray, quiet: bool) -> None:
    """Fit `clf`, with a progress bar on stderr unless `quiet` (closed before any error is printed)."""
    bar = None
    if not quiet:
        try:
            from tqdm import tqdm

            # a log (stderr no terminal) gets a line every few seconds, not one per epoch (hundreds per fit)
            interval = 0.1 if sys.stderr.isatty() else 5.0
            bar = tqdm(total=None, desc="training", unit="epoch", file=sys.stderr, mininterval=interval)
        except ImportError:  # pragma: no cover
            bar = None

    def progress(p: dict[str, Any]) -> None:
        if bar is not None:
            bar.total = p["n_epochs"]
            bar.set_postfix(loss=f"{p['loss']:.4f}", refresh=False)  # drawn by update, at its interval
            bar.update(1)

    try:
        clf.fit(X, y, callback=progress)
    finally:
        if bar is not None:
            bar.close()  # ends the bar's line: an error is printed on its own


def _fit(args: argparse.Namespace) -> int:
    """Train on a CSV, write the rule-list document, print the rule list."""
    from models.estimator import NeuRulesClassifier

    args.target = args.target.strip()  # as the header's names are
    _check_out(args.out)
    df = _read_csv(args.data, text=frozenset({args.target}))
    if args.target not in df.columns:
        names = list(df.columns)
        shown = f"{names[:20]} and {len(names) - 20} more" if len(names) > 20 else str(names)
        print(f"error: {args.data}: target column {args.target!r} not in {shown}", file=sys.stderr)
        return 2
    _name_stray_text(df, args.target)
    X, y = _training_rows(df, args.target)
    _name_many_classes(y, args.target)
    params: dict[str, Any] = {
        "n_rules": args.rules,
        "random_state": args.seed,
        "device": args.device,
    }
    if args.epochs is not None:
        params["epochs"] = args.epochs
    if args.batch_size is not None:
        params["batch_size"] = args.batch_size
    if args.lr is not None:
        params["lr"] = args.lr
    clf = NeuRulesClassifier(**params)
    _train(clf, X, y, args.quiet)
    doc = clf.rule_list_.to_dict()
    doc["target"] = args.target
    rl = RuleList.from_dict(doc)
    Path(args.out).write_text(json.dumps(rl.to_dict(), indent=2) + "\n")
    print(rl.to_text())
    acc = float(np.mean(clf.predict(X) == y))
    print(
        f"\n{len(rl.rules)} rules; training accuracy {acc:.4f}; written to {args.out}",
        file=sys.stderr,
    )
    return 0


def _predict(args: argparse.Namespace) -> int:
    """Predict a CSV with a stored rule list: index, prediction, probability, rule_id, p_<class>..."""
    rl = _load_model(args.model)
    # a categorical feature's cells stay text, as the service's predict.csv keeps them: a column of codes that
    # look like numbers (zip 02139, ICD 0150) read as numbers met the list's categories as 2139 and 150
    numeric = frozenset(f.name for f in rl.features if f.type == "numeric")
    categorical = frozenset(f.name for f in rl.features if f.type == "categorical")
    df = _read_csv(args.data, text=categorical, commas_in=numeric.__contains__)
    _check_numbers(rl, df)
    try:
        header, rows = decision_table(rl, df)  # the service's predict.csv writes the same columns
    except ValueError as e:  # a column the model needs is missing: say in which file
        raise ValueError(f"{args.data}: {e}") from None
    out = pd.DataFrame(rows, columns=header)
    if args.out:
        out.to_csv(args.out, index=False)
    else:
        out.to_csv(sys.stdout, index=False)
    return 0


def _rules(text: str) -> int:
    """`--rules`: a whole number from 1 to MAX_RULES."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 1 <= n <= MAX_RULES:
        raise argparse.ArgumentTypeError(f"must be from 1 to {MAX_RULES}, got {n}")
    return n


def _epochs(text: str) -> int | str:
    """`--epochs`: a positive whole number or `auto`, as the learner takes it."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `neurules` command."""
    ap = argparse.ArgumentParser(prog="neurules", description="Learn and apply crisp NeuRules rule lists.")
    sub = ap.add_subparsers(dest="command", required=True)
    f = sub.add_parser("fit", help="train on a CSV and write the rule list as JSON")
    f.add_argument("data", help="CSV file with a header row")
    f.add_argument("--target", required=True, help="name of the label column")
    f.add_argument("--rules", type=_rules, default=10, help=f"maximum number of rules, 1-{MAX_RULES} (default 10)")
    f.add_argument("--epochs", type=_epochs, default=None, help="training epochs, or auto (default: auto)")
    f.add_argument("--batch-size", type=int, default=None, help="rows per optimiser step (default 1024)")
    f.add_argument("--lr", type=float, default=None, help="learning rate of the optimiser (default 0.02)")
    f.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    f.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    f.add_argument("--out", required=True, help="where to write the rule-list JSON document")
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.set_defaults(func=_fit)
    p = sub.add_parser("predict", help="predict a CSV with a rule-list JSON document")
    p.add_argument("model", help="rule-list JSON written by `neurules fit`")
    p.add_argument("data", help="CSV file with the model's feature columns")
    p.add_argument("--out", default=None, help="output CSV (default: stdout)")
    p.set_defaults(func=_predict)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `neurules` command."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # `neurules predict ... | head`: the reader has what it wanted, as for any filter
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 141  # 128 + SIGPIPE, as a shell reports a filter ended by a closed pipe
    except (ValueError, OSError) as exc:  # OSError: missing file, a directory, no permission
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
