"""`neurules predict` reads a file as the service's predict.csv does (README: "Both read a CSV as the service
does"): the same decisions for `;` (with decimal commas), tab, `|` and gzip-compressed files."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from models.cli import main
from tests.conftest import Api

ROWS = [("67,5", "50", "yes"), ("30", "5,25", "no"), ("", "3", ""), ("61", "", "yes"), ("45,0", "12,5", "maybe")]


def _file(sep: str, decimal_commas: bool) -> bytes:
    lines = [sep.join(("age", "income", "smoker"))]
    for row in ROWS:
        cells = row if decimal_commas else tuple(c.replace(",", ".") for c in row)
        lines.append(sep.join(cells))
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("semicolon, decimal commas", _file(";", True)),
        ("tab, decimal commas", _file("\t", True)),
        ("pipe", _file("|", False)),
        ("comma", _file(",", False)),
        ("gzip, semicolon", gzip.compress(_file(";", True))),
    ],
)
def test_the_command_line_decides_each_file_as_predict_csv(
    sqlite_api: Api, doc, tmp_path: Path, name: str, data: bytes
) -> None:
    """A data probe: `neurules fit` on a `;` file said the target 'target' was not in ['age;chol;sex;target'],
    `neurules predict` found no feature in a tab file, and a `.csv.gz` was 'utf-8 codec can't decode byte 0x8b'."""
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv", files={"file": ("x.csv", data, "text/csv")}, headers=sqlite_api.h()
    )
    assert r.status_code == 200, (name, r.text)
    served = pd.read_csv(io.StringIO(r.text))
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (tmp_path / "x.csv").write_bytes(data)
    assert main(["predict", str(tmp_path / "m.json"), str(tmp_path / "x.csv"), "--out", str(tmp_path / "o.csv")]) == 0
    cli = pd.read_csv(tmp_path / "o.csv")
    assert list(served.columns) == [*cli.columns, "audit_seq"]  # the service adds each row's audit record
    assert cli["rule_id"].tolist() == served["rule_id"].tolist(), name
    assert cli["prediction"].tolist() == served["prediction"].tolist(), name
    assert served["rule_id"].tolist() == [1, 2, 2, 1, 0]  # 67.5 and a smoker: rule 1; income 5.25 or 3: rule 2


def test_a_column_mixing_decimal_commas_and_points_is_refused_by_both(sqlite_api: Api, doc, tmp_path: Path) -> None:
    data = b"age;income;smoker\n67,5;50;yes\n30.5;5;no\n"
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv", files={"file": ("x.csv", data, "text/csv")}, headers=sqlite_api.h()
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "csv_mixed_decimal_separators", r.text
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (tmp_path / "x.csv").write_bytes(data)
    assert main(["predict", str(tmp_path / "m.json"), str(tmp_path / "x.csv")]) == 2


def test_columns_the_model_does_not_read_are_not_refused_by_either(sqlite_api: Api, doc, tmp_path: Path) -> None:
    """A reviewer: the command line read decimal commas in every column, so a reference column holding
    `1.234,5` (or `2,5` beside `3.5`) made it refuse a file predict.csv?ignore_extra=true decides."""
    data = b"age;income;smoker;ref\n67,5;50;yes;1.234,5\n30;5,25;no;3.5\n"
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv?ignore_extra=true",
        files={"file": ("x.csv", data, "text/csv")},
        headers=sqlite_api.h(),
    )
    assert r.status_code == 200, r.text
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (tmp_path / "x.csv").write_bytes(data)
    assert main(["predict", str(tmp_path / "m.json"), str(tmp_path / "x.csv"), "--out", str(tmp_path / "o.csv")]) == 0
    assert pd.read_csv(tmp_path / "o.csv")["rule_id"].tolist() == pd.read_csv(io.StringIO(r.text))["rule_id"].tolist()


@pytest.mark.parametrize(
    ("data", "code", "cli_says"),
    [
        (b"age,income,smoker\n45,3,yes,9\n46,3,no,9\n", "csv_ragged_rows", "4 fields, but the header has 3"),
        (b"age,income,smoker\n45,3\n", "csv_ragged_rows", "2 fields, but the header has 3"),
        (b"age;income;smoker\n45;3;yes\n   \n", "csv_ragged_rows", "row 1 (line 3): 1 fields"),
        (b'age,income,smoker\n45,3,"yes"x\n', "csv_malformed", "line 2"),
        (b"age,income,smoker\n3_2,3,yes\n", "invalid_record", "age"),
        (b"age,income,smoker\n45,3,y\x00es\n", "csv_nul_byte", "NUL"),
        (b"age,income,smoker\n", "csv_no_rows", "no data rows"),
    ],
)
def test_a_file_the_service_refuses_the_command_line_refuses(
    sqlite_api: Api, doc, tmp_path: Path, capsys, data: bytes, code: str, cli_says: str
) -> None:
    """A parity probe: pandas read these files leniently (a row one field longer than the header shifted every
    column and was decided by the wrong rule; `3_2` was 32; text after a closing quote joined the cell), where the
    service answers 422. The command line reads records as the service does and refuses them, saying where."""
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv", files={"file": ("x.csv", data, "text/csv")}, headers=sqlite_api.h()
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (tmp_path / "x.csv").write_bytes(data)
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "m.json"), str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and cli_says in err, err


@pytest.mark.parametrize(
    ("data", "status", "said"),
    [
        (b"\xef\xbb\xbfage,income,smoker\n1,\xff,yes\n", 422, "byte 23 (line 2) is b'\\xff'"),  # BOM: the real place
        (b"age,income,smoker\n-nan,3,yes\nnAn,+nan,no\n", 200, None),  # numbers the service reads as missing
        (b"age,income,smoker\ninf,3,yes\nx,3,no\n", 422, "expected a finite number, got 'inf' (row 0)"),
        (b"\nage,income,smoker\n1,3,yes\n", 422, "line 1 is empty"),
        (b"1,2,3\n45,3,7\n", 422, "looks like data"),
        (b"age,income,smoker,caf\xc3\xa9,cafe\xcc\x81\n1,3,yes,1,1\n", 422, "print alike"),
    ],
)
def test_both_sides_read_these_files_alike(
    sqlite_api: Api, doc, tmp_path: Path, capsys, data: bytes, status: int, said: str | None
) -> None:
    """A reviewer: the command line named a bad byte after a byte-order mark three places early, refused `-nan`
    (the service reads it as missing), named a later text cell before an earlier infinite one, and took a blank
    first line, an all-number header and look-alike names the service refuses (whose blank-first-line message
    said "all values are numbers"). Both now use the same checks (`models.csvtext`)."""
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv?ignore_extra=true",
        files={"file": ("x.csv", data, "text/csv")},
        headers=sqlite_api.h(),
    )
    assert r.status_code == status, r.text
    (tmp_path / "m.json").write_text(json.dumps(doc))
    (tmp_path / "x.csv").write_bytes(data)
    capsys.readouterr()
    out = tmp_path / "o.csv"
    assert main(["predict", str(tmp_path / "m.json"), str(tmp_path / "x.csv"), "--out", str(out)]) == (
        0 if status == 200 else 2
    )
    if said is None:
        assert pd.read_csv(out)["rule_id"].tolist() == pd.read_csv(io.StringIO(r.text))["rule_id"].tolist()
    else:
        assert said in r.json()["error"]["message"] and said in capsys.readouterr().err, r.text
