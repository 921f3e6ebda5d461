"""CSV error messages name places one way (README, "CSV error messages"): `line N` is a file line with the
header as line 1, blank lines and lines inside quoted cells counted; `row i` is a data record from 0, as the
answer's `index`. Before, predict.csv's bad values said `line <row + 2>` (wrong after a blank line or a
quoted newline) and the upload's non-finite and decimal-separator checks said `data row <row + 1>`."""

from __future__ import annotations

import io
from typing import Any

import pytest

from app.services import batch, csvdata
from app.services.errors import Invalid
from tests.app.test_batch import numeric_csv, numeric_doc, one_shot, served, small_chunks  # noqa: F401

# the bad record is row 2 (the third data record) and starts on line 6: a blank line (3) and a quoted
# cell spanning lines 4-5 come before it
SHIFTED = b'age,income,smoker\n1,2,yes\n\n3,4,"y\nes"\nold,5,no\n'


def _upload(api, data: bytes) -> Any:
    return api.client.post("/v1/datasets", files={"file": ("x.csv", data, "text/csv")}, headers=api.h())


def _predict_csv(api, ref: str, data: bytes) -> Any:
    return api.client.post(
        f"/v1/models/{ref}/predict.csv", files={"file": ("x.csv", data, "text/csv")}, headers=api.h()
    )


def test_predict_csv_names_the_line_the_record_is_on_and_its_row(sqlite_api, doc) -> None:
    v = sqlite_api.import_model(doc)
    r = _predict_csv(sqlite_api, v["id"], SHIFTED)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"] == [
        {"field": "line 6.age", "message": "expected a number, got 'old' (row 2)", "row": 2, "line": 6}
    ], err
    assert err["message"] == "line 6.age: expected a number, got 'old' (row 2)"
    assert sqlite_api.count("audit_log") == 0


def test_a_ragged_record_is_named_by_its_row_and_the_line_it_starts_on(sqlite_api, doc) -> None:
    v = sqlite_api.import_model(doc)
    data = b'age,income,smoker\n1,2,yes\n\n3,"4\n"\n'  # row 1: two fields, lines 4-5
    for r in (_upload(sqlite_api, data), _predict_csv(sqlite_api, v["id"], data)):
        assert r.status_code == 422, r.text
        assert r.json()["error"]["message"] == "row 1 (line 4): 2 fields, but the header has 3 columns"


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b"a,t\n1,0\n\n2,1\ninf,0\n", "csv_non_finite", "column 'a': row 2 (line 5) has 'inf'"),
        (b"a;t\n1,5;0\n\n2;1\n1.234,5;0\n", "csv_thousands_separator", "column 'a': row 2 (line 5) has '1.234,5'"),
        (
            b"a;t\n1,5;0\n\n2;1\n2.5;0\n",
            "csv_mixed_decimal_separators",
            "(row 0, line 2: '1,5') and decimal points (row 2, line 5: '2.5')",
        ),
    ],
)
def test_upload_messages_count_rows_from_0_and_name_their_line(sqlite_api, data: bytes, code: str, words: str) -> None:
    r = _upload(sqlite_api, data)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == code and words in err["message"], err
    assert "data row" not in err["message"]


def test_predict_csv_decimal_separators_are_named_as_the_upload_names_them(sqlite_api, doc) -> None:
    v = sqlite_api.import_model(doc)
    r = _predict_csv(sqlite_api, v["id"], b"age;income;smoker\n30,5;5;yes\n\n40.5;5;no\n")
    assert r.status_code == 422, r.text
    assert "(row 0, line 2: '30,5') and decimal points (row 1, line 4: '40.5')" in r.json()["error"]["message"]


def test_row_lines_across_chunks_equal_the_one_shot_parse(small_chunks: None) -> None:  # noqa: F811
    """Blank lines before chunk boundaries shift every later line: the chunked check and the one-shot parse
    name the same line and row, and both are the record's real place in the file."""
    model = served(numeric_doc())
    lines = numeric_csv(1200).decode().splitlines()
    for at in (7, 300, 301, 900):  # blank lines, spread over several chunks
        lines.insert(at, "")
    bad_line = 1100  # a file line (from 1)
    lines[bad_line - 1] = "oops,1"
    data = ("\n".join(lines) + "\n").encode()
    bad_row = bad_line - 2 - 4  # minus the header and the four blank lines before it
    for check in (
        lambda: one_shot(model, data),
        lambda: batch.check_file(model, io.BytesIO(data), max_rows=10**9, ignore_extra=False),
    ):
        with pytest.raises(Invalid) as e:
            check()
        d = e.value.details[0]
        assert (d["field"], d["row"], d["line"]) == (f"line {bad_line}.a", bad_row, bad_line), d


def test_row_lines_map_rows_to_their_first_line() -> None:
    t = csvdata.parse_csv(b'a,b\n1,x\n\n\n2,"y\n\nz"\n3,w\n4,v\r\n\r\n5,u\n')
    assert [t.lines.line(r) for r in range(t.n_rows)] == [2, 5, 8, 9, 11]
    assert t.lines.where(4) == "row 4 (line 11)"


def test_file_errors_name_their_place_in_details(sqlite_api, doc) -> None:
    """A malformed line or a bad header answered 422 with empty `details`: the detail now names the place as a
    field (`line N` with its line, `header`), for the upload and predict.csv alike."""
    v = sqlite_api.import_model(doc)
    malformed = b'age,income,smoker\n1,"x\n2,3\n'
    for r in (_upload(sqlite_api, malformed), _predict_csv(sqlite_api, v["id"], malformed)):
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "csv_malformed", err
        (detail,) = err["details"]
        assert detail["field"] == f"line {detail['line']}" and err["message"].startswith(detail["field"] + ": "), err
    lookalike = "caf\u00e9,cafe\u0301,t\n1,2,0\n".encode()  # composed and decomposed: two names printing alike
    for r in (
        _upload(sqlite_api, b"a,b,a\n1,2,3\n"),
        _predict_csv(sqlite_api, v["id"], b"age,age\n1,2\n"),
        _upload(sqlite_api, lookalike),
    ):
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "csv_duplicate_columns" and err["details"][0]["field"] == "header", err
    assert sqlite_api.count("audit_log") == 0
