"""Inputs as users have them (issue 8, item 4): `.csv.gz`, `;` files with decimal commas, NUL bytes,
unreadable JSON bodies. Read correctly or refused with a 4xx that says how to fix it; nothing half-written.
"""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import pytest

from worker.training import prepare

PLAIN = b"age,income,smoker,target\n" + b"".join(
    f"{20 + i},{i * 1.5},{'yes' if i % 3 else 'no'},{i % 2}\n".encode() for i in range(40)
)
# the same table as a European spreadsheet saves it
SEMICOLON = PLAIN.replace(b",", b";").replace(b".", b",")


def _upload(api, name: str, data: bytes, ctype: str = "text/csv", **kw: Any):
    return api.client.post("/v1/datasets", files={"file": (name, data, ctype)}, headers=api.h(), **kw)


def _profile(body: dict[str, Any]) -> dict[str, tuple[str, Any, Any]]:
    return {c["name"]: (c["type"], c["min"], c["max"]) for c in body["columns"]}


# --- gzip ------------------------------------------------------------------------------------------


def test_csv_gz_reads_like_the_csv(api) -> None:
    plain = _upload(api, "people.csv", PLAIN)
    by_name = _upload(api, "people.csv.gz", gzip.compress(PLAIN), "application/gzip")
    by_magic = _upload(api, "export.csv", gzip.compress(PLAIN), "application/octet-stream")
    for r in (plain, by_name, by_magic):
        assert r.status_code == 201, r.text
    assert by_name.json()["name"] == "people" and by_name.json()["filename"] == "people.csv.gz"
    for r in (by_name, by_magic):
        assert _profile(r.json()) == _profile(plain.json())
        assert r.json()["n_rows"] == 40 and r.json()["sha256"] == plain.json()["sha256"]


def test_body_sent_with_content_encoding_gzip(api, doc) -> None:
    from tests.app.test_contract import RECORDS, _csv

    body, ctype = _multipart("r.csv", _csv(RECORDS))
    headers = {**api.h(), "content-type": ctype, "content-encoding": "gzip"}
    v = api.import_model(doc)
    r = api.client.post(f"/v1/models/{v['id']}/predict.csv", content=gzip.compress(body), headers=headers)
    assert r.status_code == 200, r.text
    assert [line.split(",")[3] for line in r.text.splitlines()[1:]] == ["1", "2", "0"]
    r = api.client.post("/v1/datasets", content=gzip.compress(_multipart("p.csv", PLAIN)[0]), headers=headers)
    assert r.status_code == 201 and r.json()["n_rows"] == 40
    r = api.client.post("/v1/datasets", content=body, headers={**headers, "content-encoding": "br"})
    assert r.status_code == 415 and "Content-Encoding 'br'" in r.json()["error"]["message"]


def test_media_type_in_any_case_and_x_gzip_are_read(api, doc) -> None:
    """`Multipart/Form-Data` (media types are case-insensitive) and `Content-Encoding: x-gzip` (gzip's old name,
    which HTTP/1.1 reads as gzip) were 415s."""
    from tests.app.test_contract import RECORDS, _csv

    body, ctype = _multipart("r.csv", _csv(RECORDS))
    mixed = ctype.replace("multipart/form-data", "Multipart/Form-Data")
    v = api.import_model(doc)
    for headers, content in (
        ({"content-type": mixed}, body),
        ({"content-type": ctype, "content-encoding": "x-gzip"}, gzip.compress(body)),
    ):
        r = api.client.post(f"/v1/models/{v['id']}/predict.csv", content=content, headers={**api.h(), **headers})
        assert r.status_code == 200, r.text
        assert [line.split(",")[3] for line in r.text.splitlines()[1:]] == ["1", "2", "0"]
    r = api.client.post(
        "/v1/datasets", content=_multipart("p.csv", PLAIN)[0], headers={**api.h(), "content-type": mixed}
    )
    assert r.status_code == 201 and r.json()["n_rows"] == 40, r.text


def _multipart(name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "----nrtest"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: text/csv\r\n\r\n"
    ).encode()
    return head + data + f"\r\n--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_gzip_bomb_is_413_and_nothing_is_written(tmp_path) -> None:
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", max_upload_bytes=200_000)
    api = next(gen)
    try:
        bomb = gzip.compress(b"a,b\n" + b"1,2\n" * 2_000_000)  # 8 MB of CSV in ~8 kB
        assert len(bomb) < 200_000
        r = _upload(api, "bomb.csv.gz", bomb)
        assert r.status_code == 413, r.text
        assert "decompressed size" in r.json()["error"]["message"]
        r = api.client.post(
            "/v1/datasets",
            content=gzip.compress(_multipart("b.csv", b"a,b\n" + b"1,2\n" * 2_000_000)[0]),
            headers={**api.h(), "content-type": _multipart("x", b"")[1], "content-encoding": "gzip"},
        )
        assert r.status_code == 413, r.text
        assert api.count("datasets") == 0 and api.count("blobs") == 0
    finally:
        gen.close()


def test_broken_gzip_is_422(api) -> None:
    whole = gzip.compress(PLAIN)
    for data in (whole[: len(whole) // 2], b"\x1f\x8b" + b"not gzip at all"):
        r = _upload(api, "x.csv.gz", data)
        assert r.status_code == 422 and r.json()["error"]["code"] == "csv_bad_gzip", r.text
    assert api.count("datasets") == 0


# --- separators and decimal commas ---------------------------------------------------------------------


def test_semicolon_decimal_commas_profile_train_and_predict_as_numbers(api) -> None:
    r = _upload(api, "eu.csv", SEMICOLON)
    assert r.status_code == 201, r.text
    assert _profile(r.json()) == _profile(_upload(api, "us.csv", PLAIN).json())
    assert _profile(r.json())["income"] == ("numeric", 0.0, 58.5)
    # the worker reads the stored bytes with the same parser: numbers, not categories
    prep = prepare(SEMICOLON, "target", None)
    assert prep.feature_types == {"age": "numeric", "income": "numeric", "smoker": "categorical"}
    assert prep.columns["income"].dtype.kind == "f" and prep.columns["income"][3] == 4.5


def test_predict_csv_reads_decimal_commas(api) -> None:
    doc = {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "t",
        "classes": [0, 1],
        "features": [{"name": "x", "type": "numeric", "fill_value": 0.0, "min": 0.0, "max": 9.0}],
        "rules": [
            {
                "conditions": [{"feature": "x", "op": "between", "low": 2.5, "high": None}],
                "class_counts": [0, 3],
                "probabilities": [0.2, 0.8],
            }
        ],
        "default": {"class_counts": [3, 0], "probabilities": [0.8, 0.2]},
        "smoothing": 1.0,
        "metadata": {},
    }
    v = api.import_model(doc, name="dec")
    data = b"x;id\n2,4;a\n2,5;b\n;c\n"
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        params={"ignore_extra": True},
        files={"file": ("x.csv", data, "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 200, r.text
    assert [line.split(",")[3] for line in r.text.splitlines()[1:]] == ["0", "1", "0"]


@pytest.mark.parametrize(
    ("data", "code", "words"),
    [
        (b"a;b;t\n1,5;1;0\n2.5;2;1\n", "csv_mixed_decimal_separators", "column 'a' mixes decimal commas"),
        (b"a;b;t\n1.234,5;1;0\n2,5;2;1\n", "csv_thousands_separator", "remove the '.' thousands separators"),
    ],
)
def test_ambiguous_numbers_are_refused_saying_how_to_fix(api, data: bytes, code: str, words: str) -> None:
    r = _upload(api, "eu.csv", data)
    assert r.status_code == 422 and r.json()["error"]["code"] == code, r.text
    assert words in r.json()["error"]["message"]
    assert api.count("datasets") == 0


def test_text_columns_with_commas_stay_text(sqlite_api) -> None:
    r = _upload(sqlite_api, "eu.csv", b"size;t\n1,5;0\nlarge;1\n2,5;0\n")
    assert r.status_code == 201 and _profile(r.json())["size"][0] == "categorical"
    r = _upload(sqlite_api, "us.csv", b'size,t\n"1,5",0\n"2,5",1\n')  # quoted in a comma file: text
    assert r.status_code == 201 and _profile(r.json())["size"][0] == "categorical"


# --- integer class labels beyond float precision ----------------------------------------------------------


def test_integer_labels_beyond_float_precision_stay_distinct(sqlite_api) -> None:
    """Labels were read as int(float(cell)): 9007199254740992 and 9007199254740993 became one class (the job
    failed 'single class' although the profile counted 2), and 10**20 failed the job with an OverflowError.
    Such labels are kept as their text; smaller integers stay integers. An evaluation scores them exactly."""
    big = [9007199254740992 + i % 2 for i in range(40)]
    data = b"x,target\n" + b"".join(f"{i},{t}\n".encode() for i, t in enumerate(big))
    prep = prepare(data, "target", None)
    assert prep.y.tolist() == [str(t) for t in big]
    huge = b"x,target\n" + b"".join(f"{i},{10**20 + i % 3}\n".encode() for i in range(30))
    assert sorted(set(prepare(huge, "target", None).y.tolist())) == [str(10**20 + k) for k in range(3)]
    small = b"x,target\n" + b"".join(f"{i},{i % 2 * 9007199254740991}\n".encode() for i in range(20))
    assert prepare(small, "target", None).y.tolist() == [i % 2 * 9007199254740991 for i in range(20)]

    doc = {
        "format": "neurules.rulelist",
        "version": 1,
        "target": "target",
        "classes": ["9007199254740992", "9007199254740993"],
        "features": [{"name": "x", "type": "numeric", "fill_value": 0.0, "min": 0.0, "max": 39.0}],
        "rules": [
            {
                "conditions": [{"feature": "x", "op": "between", "low": 20.0, "high": None}],
                "class_counts": [0, 20],
                "probabilities": [1 / 22, 21 / 22],
            }
        ],
        "default": {"class_counts": [20, 0], "probabilities": [21 / 22, 1 / 22]},
        "smoothing": 1.0,
        "metadata": {},
    }
    v = sqlite_api.import_model(doc, name="big")
    labels = b"x,target\n" + b"".join(f"{i},{9007199254740992 + int(i >= 20)}\n".encode() for i in range(40))
    ds = _upload(sqlite_api, "big.csv", labels).json()["id"]
    r = sqlite_api.client.post(f"/v1/models/{v['id']}/evaluations", json={"dataset_id": ds}, headers=sqlite_api.h())
    assert r.status_code == 201, r.text
    assert r.json()["metrics"]["accuracy"] == 1.0 and r.json()["excluded"]["unseen_class"] == 0, r.json()


# --- NUL bytes -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (b"a,b,t\n1,x,0\n2,y\x00z,1\n", "row 1 (line 3), column 2 ('b')"),
        (b"a,b\x00,t\n1,x,0\n", "line 1 (the header), column 2"),
    ],
)
def test_nul_bytes_are_refused_at_upload_naming_line_and_column(api, doc, data: bytes, where: str) -> None:
    r = _upload(api, "nul.csv", data)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "csv_nul_byte" and err["message"].startswith(where), err["message"]
    assert api.count("datasets") == 0 and api.count("blobs") == 0
    v = api.import_model(doc)
    r = api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        files={"file": ("x.csv", b"age,income,smoker\n1,2,y\x00s\n", "text/csv")},
        headers=api.h(),
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "csv_nul_byte"
    assert api.count("audit_log") == 0


# --- JSON bodies the parser cannot read ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"records": [' + b"[" * 100_000 + b"]" * 100_000 + b"]}", "nested too deeply"),
        (b'{"records": [{"age": ' + b"9" * 5000 + b"}]}", "more than 4300 digits"),
        (b'{"records": [{"smoker": "\xff\xfe"}]}', "not valid UTF-8"),
    ],
    ids=["deep", "5000 digits", "not utf-8"],
)
def test_unreadable_json_is_a_documented_422(sqlite_api, doc, body: bytes, words: str) -> None:
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict", content=body, headers={**sqlite_api.h(), "content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input" and err["details"][0]["field"] == "body" and words in err["message"]
    documented = sqlite_api.app.openapi()["paths"]["/v1/models/{ref}/predict"]["post"]["responses"]
    assert "422" in documented and "400" not in documented
    assert json.loads(io.BytesIO(r.content).read())  # a valid JSON error body


def test_content_encoding_on_two_lines_is_read_as_one_list(sqlite_api) -> None:
    """A client probe: `Content-Encoding: identity` then `Content-Encoding: gzip` on two lines read only the first
    (a gzip body parsed as multipart: 400 "Invalid multipart data"); the lines are one list (RFC 9110)."""
    import httpx

    api = sqlite_api
    body, ctype = _multipart("p.csv", PLAIN)
    for lines in (
        [("content-encoding", "identity"), ("content-encoding", "gzip")],
        [("content-encoding", "gzip, identity")],
    ):
        headers = httpx.Headers([*api.h().items(), ("content-type", ctype), *lines])
        r = api.client.post("/v1/datasets", content=gzip.compress(body), headers=headers)
        assert r.status_code == 201 and r.json()["n_rows"] == 40, r.text
    twice = httpx.Headers(
        [*api.h().items(), ("content-type", ctype), ("content-encoding", "gzip"), ("content-encoding", "gzip")]
    )
    r = api.client.post("/v1/datasets", content=gzip.compress(gzip.compress(body)), headers=twice)
    assert r.status_code == 415 and "'gzip, gzip'" in r.json()["error"]["message"], r.text


def test_a_gzip_body_over_the_limit_names_the_configured_limit(tmp_path) -> None:
    """The 413 named the limit plus the multipart framing's room (165536 for a limit of 100000)."""
    from tests.conftest import make_api

    for api in make_api(tmp_path, "sqlite", max_upload_bytes=100_000):
        body, ctype = _multipart("p.csv", PLAIN + b"1,2\n" * 60_000)
        headers = {**api.h(), "content-type": ctype, "content-encoding": "gzip"}
        r = api.client.post("/v1/datasets", content=gzip.compress(body), headers=headers)
        assert r.status_code == 413, r.text
        assert "more than 100000 bytes" in r.json()["error"]["message"], r.text
