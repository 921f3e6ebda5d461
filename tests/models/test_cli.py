"""The `neurules` command line, run as a subprocess on a small CSV."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    code = "import sys; from models.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )


def test_fit_then_predict(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame(
        {
            "age": rng.integers(20, 80, n),
            "smoker": rng.choice(["yes", "no"], n),
            "bmi": rng.normal(25, 4, n).round(1),
        }
    )
    df["sick"] = np.where((df["age"] > 55) & (df["smoker"] == "yes"), "yes", "no")
    data = tmp_path / "train.csv"
    df.to_csv(data, index=False)
    model = tmp_path / "model.json"

    fit = _run(
        "fit",
        str(data),
        "--target",
        "sick",
        "--rules",
        "4",
        "--seed",
        "1",
        "--out",
        str(model),
    )
    assert fit.returncode == 0, fit.stderr
    assert "if " in fit.stdout and "else" in fit.stdout
    assert "training" in fit.stderr  # the tqdm progress bar
    doc = json.loads(model.read_text())
    assert doc["format"] == "neurules.rulelist" and doc["target"] == "sick"
    assert [f["name"] for f in doc["features"]] == ["age", "smoker", "bmi"]

    preds = tmp_path / "preds.csv"
    pred = _run("predict", str(model), str(data), "--out", str(preds))
    assert pred.returncode == 0, pred.stderr
    out = pd.read_csv(preds)
    assert list(out.columns) == ["index", "prediction", "probability", "rule_id", "p_no", "p_yes"]
    assert len(out) == n and out["index"].tolist() == list(range(n))
    assert (out["prediction"] == df["sick"]).mean() > 0.9
    np.testing.assert_allclose(out["p_no"] + out["p_yes"], 1.0, atol=2e-6)
    np.testing.assert_allclose(out["probability"], out[["p_no", "p_yes"]].max(axis=1))
    assert out["rule_id"].between(0, len(doc["rules"])).all()

    # features only (no target column) also works, to stdout
    df.drop(columns=["sick"]).to_csv(tmp_path / "x.csv", index=False)
    again = _run("predict", str(model), str(tmp_path / "x.csv"))
    assert again.returncode == 0 and again.stdout.startswith("index,prediction,probability,rule_id,")


def test_bad_target_is_a_clean_error(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": [1, 2], "b": [0, 1]}).to_csv(data, index=False)
    res = _run("fit", str(data), "--target", "nope", "--out", str(tmp_path / "m.json"))
    assert res.returncode == 2 and "nope" in res.stderr


def test_labels_are_read_as_the_service_reads_them(tmp_path: Path) -> None:
    """Whole numbers are one class per value however written (`0`, `0.0`; as the service trains), fractions
    stay text (`1.5` failed as a 'continuous' target), and the file is read once (a pipe works)."""
    rng = np.random.default_rng(1)
    a = rng.normal(size=60)
    data = tmp_path / "codes.csv"
    spelled = [("1" if i % 2 else "1.0") if v > 0 else ("0" if i % 2 else "0.0") for i, v in enumerate(a)]
    data.write_text("a,y\n" + "".join(f"{v},{t}\n" for v, t in zip(a, spelled, strict=True)))
    model = tmp_path / "m.json"
    res = _run("fit", str(data), "--target", "y", "--epochs", "3", "--quiet", "--out", str(model))
    assert res.returncode == 0, res.stderr
    classes = json.loads(model.read_text())["classes"]
    assert classes == [0, 1] and all(type(c) is int for c in classes)
    data.write_text("a,grade\n" + "".join(f"{v},{1.5 if v > 0 else 2.5}\n" for v in a))
    code = "import sys; from models.cli import main; sys.exit(main(sys.argv[1:]))"
    args = ["fit", "/dev/stdin", "--target", "grade", "--epochs", "3", "--quiet", "--out", str(model)]
    res = subprocess.run(  # input= is a pipe: it cannot be read twice
        [sys.executable, "-c", code, *args], cwd=ROOT, input=data.read_text(), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(model.read_text())["classes"] == ["1.5", "2.5"]


def test_unreadable_paths_are_a_clean_error(tmp_path: Path) -> None:
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": [1, 2], "b": [0, 1]}).to_csv(data, index=False)
    res = _run("predict", str(tmp_path), str(data))  # a directory as the model: was a traceback
    assert res.returncode == 2 and res.stderr.startswith("error:") and "Traceback" not in res.stderr


def test_rows_without_a_target_are_left_out_as_the_service_does(tmp_path: Path) -> None:
    """`neurules fit` failed 'Input y contains NaN' where the service leaves such rows out."""
    rng = np.random.default_rng(2)
    a = rng.normal(size=60)
    y = np.where(a > 0, 1.0, 0.0)
    y[[3, 17]] = np.nan
    data = tmp_path / "gaps.csv"
    pd.DataFrame({"a": a, "y": y}).to_csv(data, index=False)
    model = tmp_path / "m.json"
    res = _run("fit", str(data), "--target", "y", "--epochs", "3", "--quiet", "--out", str(model))
    assert res.returncode == 0, res.stderr
    assert "2 row(s) without a 'y' value left out" in res.stderr
    classes = json.loads(model.read_text())["classes"]
    assert classes == [0, 1] and all(type(c) is int for c in classes)


@pytest.fixture(scope="module")
def small_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rule list on numeric `a`, `b` (quickly trained)."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=80), rng.normal(size=80)
    folder = tmp_path_factory.mktemp("model")
    data = folder / "train.csv"
    pd.DataFrame({"a": a, "b": b, "y": (a > 0).astype(int)}).to_csv(data, index=False)
    model = folder / "m.json"
    res = _run("fit", str(data), "--target", "y", "--epochs", "2", "--quiet", "--out", str(model))
    assert res.returncode == 0, res.stderr
    return model


@pytest.mark.parametrize(
    ("cell", "column", "shown"),
    [("inf", "a", "'inf'"), ("-inf", "b", "'-inf'"), ("1e999", "a", "'inf'"), ("Infinity", "b", "'Infinity'")],
)
def test_predict_refuses_infinite_cells_naming_row_and_column(
    tmp_path: Path, small_model: Path, cell: str, column: str, shown: str
) -> None:
    """`neurules predict` decided `inf` cells the service and `neurules fit` refuse; beside text (`x`: the column is
    read as text) the first cell that is no number is named, as the service names it."""
    other = "x" if cell == "Infinity" else "0.5"
    rows = {"a": ["0.1", "0.2", "0.3"], "b": ["0.1", other, "0.3"]}
    rows[column][2] = cell
    data = tmp_path / "x.csv"
    # a blank line after the header: the line an editor shows is not the row + 2 (the message names both)
    data.write_text("a,b\n\n" + "".join(f"{x},{z}\n" for x, z in zip(rows["a"], rows["b"], strict=True)))
    res = _run("predict", str(small_model), str(data))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    said = f"expected a finite number, got {shown} (row 2) on line 5"
    if cell == "Infinity":
        said = "expected a number, got 'x' (row 1) on line 4"
    assert res.stderr.startswith(f"error: column {column!r}: {said}"), res.stderr
    assert res.stdout == ""


def test_predict_on_deeply_nested_json_is_a_clean_error(tmp_path: Path) -> None:
    """A RecursionError traceback and exit 1 before."""
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200000 + "]" * 200000)
    data = tmp_path / "x.csv"
    data.write_text("a\n1\n")
    res = _run("predict", str(deep), str(data))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.startswith("error: ") and "nested too deeply" in res.stderr


def test_duplicate_header_names_are_refused(tmp_path: Path, small_model: Path) -> None:
    """pandas renamed the second `a` to `a.1`: fit trained on it, predict silently used the first `a`."""
    data = tmp_path / "dup.csv"
    data.write_text("a,a,target\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(20)))
    fit = _run("fit", str(data), "--target", "a", "--epochs", "2", "--quiet", "--out", str(tmp_path / "m.json"))
    assert fit.returncode == 2 and fit.stderr == f"error: {data}: duplicate column name(s) in the header: 'a'\n", (
        fit.stderr
    )
    assert not (tmp_path / "m.json").exists()
    data.write_text("b,a,b,a,c\n" + "".join(f"{i},1,2,3,4\n" for i in range(3)))
    pred = _run("predict", str(small_model), str(data))
    assert pred.returncode == 2 and pred.stderr == f"error: {data}: duplicate column name(s) in the header: 'b', 'a'\n"
    data.write_text('"a,1",a.1,a\n1,2,3\n')  # no duplicate: a quoted comma, and `a.1` itself
    ok = _run("predict", str(small_model), str(data))
    assert "duplicate column" not in ok.stderr  # (the path itself holds the word)


def test_fit_that_diverges_is_an_error(tmp_path: Path) -> None:
    """`--lr 1e308` printed loss=nan, wrote a rule list with only the default rule and exited 0."""
    rng = np.random.default_rng(4)
    a = rng.normal(size=60)
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": a, "y": (a > 0).astype(int)}).to_csv(data, index=False)
    model = tmp_path / "m.json"
    res = _run("fit", str(data), "--target", "y", "--epochs", "3", "--lr", "1e308", "--out", str(model))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    expected = "error: training diverged: every restart's parameters are NaN after epoch 3 of 3"
    assert last.startswith(expected), res.stderr
    assert not model.exists()


def test_fit_reads_cells_as_the_service_does_so_its_document_imports(tmp_path: Path) -> None:
    """Blanks around names and cells, and `?` / `NA` cells, are read as the service reads a CSV: the document
    `fit` writes passes the import's checks (before, its levels `" Male"` and `"?"` were refused there), and
    `predict` decides the padded cells as their trimmed values."""
    from models.rulelist import RuleList, check_new_document

    rng = np.random.default_rng(5)
    sex = rng.choice([" Male", "Female ", "?", "NA"], size=300)
    age = rng.integers(20, 80, size=300)
    y = ((np.char.strip(sex.astype(str)) == "Male") & (age > 40)).astype(int)
    lines = ["age, sex ,y", *(f"{a},{s},{t}" for a, s, t in zip(age, sex, y, strict=True))]
    data = tmp_path / "d.csv"
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.json"
    res = _run("fit", str(data), "--target", "y", "--epochs", "5", "--quiet", "--out", str(model))
    assert res.returncode == 0, res.stderr
    doc = json.loads(model.read_text())
    rl = RuleList.from_dict(doc)
    check_new_document(rl, doc)  # raised DocumentError on " Male" / "?" before
    sex_feature = next(f for f in rl.features if f.name == "sex")
    assert set(sex_feature.categories) <= {"Male", "Female", None}
    out = tmp_path / "p.csv"
    assert _run("predict", str(model), str(data), "--out", str(out)).returncode == 0
    cells = [s.strip() for s in sex]
    trimmed = [{"age": float(a), "sex": None if c in ("?", "NA") else c} for a, c in zip(age, cells, strict=True)]
    assert pd.read_csv(out)["rule_id"].tolist() == rl.apply(trimmed).tolist()


def test_predict_keeps_categorical_codes_that_look_like_numbers_as_written(tmp_path: Path) -> None:
    """A probe: `neurules predict` read a column of zip codes as numbers (02139 -> 2139), so a rule on the
    category "02139" did not fire where the service's predict.csv (which keeps a categorical cell's text) fired."""
    doc = {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "y",
        "classes": [0, 1],
        "features": [{"name": "zip", "type": "categorical", "categories": ["02139", "A1"]}],
        "rules": [
            {
                "conditions": [{"feature": "zip", "op": "in", "values": ["02139"]}],
                "class_counts": [1, 20],
                "probabilities": [2 / 23, 21 / 23],
            }
        ],
        "default": {"class_counts": [20, 1], "probabilities": [21 / 23, 2 / 23]},
        "smoothing": 1.0,
        "metadata": {},
    }
    model = tmp_path / "zip.json"
    model.write_text(json.dumps(doc))
    data = tmp_path / "zip.csv"
    data.write_text("zip\n02139\n2139\n0150\n")
    res = _run("predict", str(model), str(data))
    assert res.returncode == 0, res.stderr
    out = pd.read_csv(io.StringIO(res.stdout))
    assert out["rule_id"].tolist() == [1, 0, 0] and out["prediction"].tolist() == [1, 0, 0], res.stdout


def test_fit_reads_a_gzipped_semicolon_file_with_decimal_commas(tmp_path: Path) -> None:
    """`neurules fit` took every file as comma-separated text: a `;` file was one column named 'age;bmi;sick'."""
    import gzip

    rng = np.random.default_rng(0)
    age, bmi = rng.integers(20, 80, 200), rng.normal(25, 4, 200).round(1)
    lines = ["age;bmi;sick"] + [f"{a};{str(b).replace('.', ',')};{int(a > 50)}" for a, b in zip(age, bmi, strict=True)]
    data = tmp_path / "train.csv.gz"
    data.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    model = tmp_path / "m.json"
    res = _run("fit", str(data), "--target", "sick", "--rules", "3", "--epochs", "30", "--quiet", "--out", str(model))
    assert res.returncode == 0, res.stderr
    doc = json.loads(model.read_text())
    assert [(f["name"], f["type"]) for f in doc["features"]] == [("age", "numeric"), ("bmi", "numeric")]


def test_fit_reads_decimal_commas_in_the_target_as_the_service_does(tmp_path: Path) -> None:
    """A reviewer: labels `1,0` / `2,0` in a `;` file are the classes 1 and 2 to the service (its upload reads
    decimal commas in every column); the command line kept them as the texts '1,0' and '2,0'."""
    lines = ["x;grade"] + [f"{i};{'2,0' if i > 20 else '1,0'}" for i in range(40)]
    data = tmp_path / "g.csv"
    data.write_text("\n".join(lines) + "\n")
    model = tmp_path / "m.json"
    res = _run("fit", str(data), "--target", "grade", "--rules", "2", "--epochs", "20", "--quiet", "--out", str(model))
    assert res.returncode == 0, res.stderr
    assert json.loads(model.read_text())["classes"] == [1, 2]


def _small_csv(path: Path, *, stray: bool = False, rows: int = 60) -> Path:
    """A small two-feature CSV; `stray`: two text cells in the numeric column `b`."""
    rng = np.random.default_rng(1)
    b = [str(v) for v in rng.integers(0, 9, rows)]
    if stray:
        b[5] = b[17] = "oops"
    a = rng.normal(0, 1, rows).round(2)
    target = (a > 0).astype(int)
    pd.DataFrame({"a": a, "b": b, "target": target}).to_csv(path, index=False)
    return path


def test_user_slips_get_one_clear_line_before_any_training(tmp_path: Path) -> None:
    """A probe's findings: `--rules 100000` trained for minutes in GBs of memory; an --out in a missing folder failed
    only after training, losing the list; `--epochs auto` (the documented default) was refused; a model and a CSV
    given the other way round answered a bare JSON error naming no file."""
    data = _small_csv(tmp_path / "d.csv")
    r = _run("fit", str(data), "--target", "target", "--rules", "100000", "--out", str(tmp_path / "m.json"))
    assert r.returncode == 2 and "--rules: must be from 1 to 200" in r.stderr, r.stderr
    r = _run("fit", str(data), "--target", "target", "--out", str(tmp_path / "none" / "m.json"))
    assert r.returncode == 2 and "the folder" in r.stderr and "does not exist" in r.stderr, r.stderr
    assert "training" not in r.stderr  # refused before the progress bar started
    r = _run("fit", str(data), "--target", " target ", "--epochs", "auto", "--quiet", "--out", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    r = _run("predict", str(data), str(tmp_path / "m.json"))
    assert r.returncode == 2 and f"{data}: not a JSON rule-list document" in r.stderr, r.stderr


def test_stray_text_in_a_number_column_and_a_continuous_target_are_named(tmp_path: Path) -> None:
    """Two `oops` cells made the numeric column `b` categorical (`b not in {1, 4}`) without a word; a target of
    ~all-distinct values was trained as hundreds of classes without one either."""
    data = _small_csv(tmp_path / "d.csv", stray=True)
    r = _run("fit", str(data), "--target", "target", "--epochs", "2", "--quiet", "--out", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    assert "column 'b' is read as categories: 2 of 60 values are not numbers ('oops' (row 5), 'oops' (row 17))" in (
        r.stderr
    )
    r = _run("fit", str(data), "--target", "a", "--epochs", "2", "--quiet", "--out", str(tmp_path / "m2.json"))
    assert r.returncode == 0 and "the target 'a' has" in r.stderr and "continuous" in r.stderr, r.stderr


def test_stray_text_among_decimal_commas_is_named_too(tmp_path: Path) -> None:
    """In a `;` file decimal commas are numbers: one stray `abc` among them made the column categorical silently
    (the note counted `3,5` as text, so the column did not look mostly numeric)."""
    rows = [f"{i % 7},{i % 3};{'abc' if i == 4 else f'{i % 5},5'};{i % 2}" for i in range(60)]
    data = tmp_path / "s.csv"
    data.write_text("x;z;target\n" + "\n".join(rows) + "\n")
    r = _run("fit", str(data), "--target", "target", "--epochs", "2", "--quiet", "--out", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    assert "column 'z' is read as categories: 1 of 60 values are not numbers ('abc' (row 4))" in r.stderr, r.stderr
    assert "column 'x'" not in r.stderr  # all decimal commas: numeric, no note


def test_a_closed_pipe_ends_predict_quietly(tmp_path: Path) -> None:
    """`neurules predict m.json big.csv | head -1` printed `error: [Errno 32] Broken pipe` and exited 2."""
    data = _small_csv(tmp_path / "d.csv", rows=20000)
    model = tmp_path / "m.json"
    assert _run("fit", str(data), "--target", "target", "--epochs", "2", "--quiet", "--out", str(model)).returncode == 0
    code = "import sys; from models.cli import main; sys.exit(main(sys.argv[1:]))"
    shell = f"{sys.executable} -c '{code}' predict {model} {data} | head -1; echo rc=${{PIPESTATUS[0]}}"
    r = subprocess.run(["bash", "-c", shell], cwd=ROOT, capture_output=True, text=True, check=False, timeout=240)
    assert r.stdout.splitlines()[0].startswith("index,prediction"), r.stdout
    assert "rc=141" in r.stdout and r.stderr == "", (r.stdout, r.stderr)


def test_a_missing_target_or_model_column_names_the_file(tmp_path: Path, small_model: Path) -> None:
    """A README probe: `target column 'nosuch' not in [...]` and `missing feature(s): ...` named no file, though every
    other error does (predict reads two)."""
    data = tmp_path / "d.csv"
    data.write_text("x,y\n1,2\n3,4\n")
    r = _run("fit", str(data), "--target", "nosuch", "--out", str(tmp_path / "m.json"))
    assert r.returncode == 2 and r.stderr.startswith(f"error: {data}: target column 'nosuch' not in"), r.stderr
    r = _run("predict", str(small_model), str(data))
    assert r.returncode == 2 and r.stderr.startswith(f"error: {data}: ") and "missing" in r.stderr, r.stderr


def test_progress_into_a_log_is_a_few_lines_not_one_per_epoch(tmp_path: Path) -> None:
    """A README probe: `neurules fit` without --quiet wrote one progress update per epoch into a captured log
    (about 360 for heart)."""
    rng = np.random.default_rng(5)
    a = rng.normal(size=80)
    data = tmp_path / "d.csv"
    pd.DataFrame({"a": a, "y": (a > 0).astype(int)}).to_csv(data, index=False)
    r = _run("fit", str(data), "--target", "y", "--epochs", "60", "--out", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    updates = r.stderr.replace("\r", "\n").count("training")
    assert 1 <= updates <= 6, r.stderr
