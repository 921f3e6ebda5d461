"""Dataset upload, list, get, delete, and the catalogue of bad CSV uploads (no rows left behind)."""

from __future__ import annotations

import gzip
import logging

import pytest

GOOD = b"age,smoker,income,risk\n61,yes,20,high\n35,no,80,low\n70,yes,,high\n44,?,55,low\n"


def upload(
    api,
    data: bytes,
    *,
    ctype: str = "text/csv",
    key: str | None = None,
    name: str | None = None,
    filename: str = "d.csv",
):
    files = {"file": (filename, data, ctype)}
    return api.client.post("/v1/datasets", files=files, data={"name": name} if name else None, headers=api.h(key))


def test_upload_profiles_columns(api) -> None:
    r = upload(api, GOOD, name="people")
    assert r.status_code == 201, r.text
    d = r.json()
    assert d["name"] == "people" and d["n_rows"] == 4 and d["n_columns"] == 4
    cols = {c["name"]: c for c in d["columns"]}
    assert cols["age"]["type"] == "numeric" and cols["age"]["min"] == 35 and cols["age"]["max"] == 70
    assert cols["smoker"]["type"] == "categorical" and cols["smoker"]["missing"] == 1
    assert cols["income"]["missing"] == 1
    assert len(d["sha256"]) == 64
    assert api.count("datasets") == 1 and api.count("blobs") == 1


def test_heart_upload(api, heart_csv) -> None:
    r = upload(api, heart_csv, filename="heart.csv")
    assert r.status_code == 201
    assert r.json()["n_rows"] == 270 and r.json()["name"] == "heart"


def test_list_get_delete_and_tenant_isolation(api, caplog) -> None:
    ds = upload(api, GOOD).json()
    assert api.client.get("/v1/datasets", headers=api.h()).json()["total"] == 1
    assert api.client.get("/v1/datasets", headers=api.h(api.key_b)).json()["total"] == 0
    assert api.client.get(f"/v1/datasets/{ds['id']}", headers=api.h()).status_code == 200
    other = api.client.get(f"/v1/datasets/{ds['id']}", headers=api.h(api.key_b))
    assert other.status_code == 404 and other.json()["error"]["code"] == "not_found"
    assert api.client.delete(f"/v1/datasets/{ds['id']}", headers=api.h(api.key_b)).status_code == 404
    with caplog.at_level(logging.INFO, logger="neurules.datasets"):
        assert api.client.delete(f"/v1/datasets/{ds['id']}", headers=api.h()).status_code == 204
    assert api.count("datasets") == 0 and api.count("blobs") == 0
    (deleted,) = [r for r in caplog.records if r.getMessage() == "dataset deleted"]  # who deleted what, kept
    key_id = api.client.get("/v1/keys", headers=api.h()).json()["items"]
    assert deleted.dataset_id == ds["id"] and deleted.sha256 == ds["sha256"]
    assert deleted.api_key_id in {k["id"] for k in key_id}
    assert api.client.get(f"/v1/datasets/{ds['id']}", headers=api.h()).status_code == 404


BAD_UPLOADS = [
    ("empty file", b"", 422, "csv_empty"),
    ("whitespace only", b"  \n\n", 422, "csv_empty"),
    ("header only", b"a,b,target\n", 422, "csv_no_rows"),
    ("no header", b"1,2,0\n3,4,1\n", 422, "csv_no_header"),
    ("non-UTF-8", "a,b\nc\xe9,1\n".encode("latin-1"), 422, "csv_not_utf8"),
    ("ragged rows", b"a,b,c\n1,2,3\n4,5\n", 422, "csv_ragged_rows"),
    ("duplicate columns", b"a,b,a\n1,2,3\n", 422, "csv_duplicate_columns"),
    ("all-missing column", b"a,b,c\n1,,x\n2,NA,y\n", 422, "csv_all_missing_column"),
    ("empty column name", b"a,,c\n1,2,3\n", 422, "csv_empty_column_name"),
]


@pytest.mark.parametrize(("label", "data", "status", "code"), BAD_UPLOADS, ids=[b[0] for b in BAD_UPLOADS])
def test_bad_uploads(api, label: str, data: bytes, status: int, code: str) -> None:
    r = upload(api, data)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == code and err["message"]
    assert api.count("datasets") == 0 and api.count("blobs") == 0


def test_messages_name_the_row(sqlite_api) -> None:
    r = upload(sqlite_api, b"a,b,c\n1,2,3\n4,5\n")
    assert "line 3" in r.json()["error"]["message"]
    r = upload(sqlite_api, b"a,b,a\n1,2,3\n")
    assert "'a'" in r.json()["error"]["message"]
    r = upload(sqlite_api, b"a,b,c\n1,,x\n2,NA,y\n")
    assert "'b'" in r.json()["error"]["message"]


def test_file_over_the_limit(tmp_path) -> None:
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", max_upload_bytes=1000)
    api = next(gen)
    try:
        big = b"a,b\n" + b"1,2\n" * 1000
        r = upload(api, big)
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large"
        assert api.count("datasets") == 0
    finally:
        gen.close()


def test_wrong_content_types(api) -> None:
    r = upload(api, GOOD, ctype="application/json")
    assert r.status_code == 415 and "text/csv" in r.json()["error"]["message"]
    r = api.client.post("/v1/datasets", json={"file": "a,b"}, headers=api.h())
    assert r.status_code == 415 and r.json()["error"]["code"] == "unsupported_media_type"
    r = api.client.post("/v1/datasets", files={"other": ("d.csv", GOOD, "text/csv")}, headers=api.h())
    assert r.status_code == 422 and "file" in r.json()["error"]["message"]
    assert api.count("datasets") == 0


def test_a_tsv_file_is_taken_with_the_type_browsers_send(sqlite_api) -> None:
    """A .tsv file chosen in a browser comes as text/tab-separated-values: it was a 415 'use text/csv'."""
    r = upload(sqlite_api, b"a\tb\tt\n1\tx\t0\n2\ty\t1\n", ctype="text/tab-separated-values")
    assert r.status_code == 201, r.text
    assert [c["name"] for c in r.json()["columns"]] == ["a", "b", "t"]


def test_semicolon_and_bom(sqlite_api) -> None:
    r = upload(sqlite_api, "\ufeffa;b;t\n1;x;0\n2;y;1\n".encode())
    assert r.status_code == 201, r.text
    assert [c["name"] for c in r.json()["columns"]] == ["a", "b", "t"]


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("n" * 201, "at most 200 characters"),
        ("a\x00b", "U+0000"),
        ("a\nb", "U+000A"),  # a line break or a bidi override garbled every list showing the name
        ("\u202eevil", "U+202E"),
    ],
)
def test_a_dataset_name_that_cannot_be_kept_is_a_422_naming_it(api, name: str, words: str) -> None:
    """A `name` over 200 characters was stored cut to 200 (201 with another name than sent); one with a NUL
    character was stored on SQLite and answered PostgreSQL's generic 'cannot be stored' 422 naming no field.
    Both are refused naming `name`, nothing stored; 200 characters are kept whole."""
    r = upload(api, GOOD, name=name)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"][0]["field"] == "name" and words in err["message"], err
    assert api.count("datasets") == 0 and api.count("blobs") == 0
    r = upload(api, GOOD, name="n" * 200)
    assert r.status_code == 201 and r.json()["name"] == "n" * 200, r.text


def test_multipart_bodies_the_parser_refuses_are_malformed_multipart_naming_the_reason(sqlite_api, doc) -> None:
    """No boundary answered a bare 400 `http_error` (Starlette's own); a file part without a file name (a text
    field) answered 'missing the file part'. Nothing is stored or decided. (A second file is a 422 naming it:
    `test_a_form_field_given_twice_or_unknown_is_a_422_naming_it`.)"""
    api = sqlite_api
    v = api.import_model(doc)
    part = b'--xx\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\nContent-Type: text/csv\r\n\r\n'
    whole = part + GOOD + b"\r\n--xx--\r\n"
    cases = [
        ("multipart/form-data", whole, "boundary"),
        # cut off (no closing boundary, or inside the part): read as "missing the 'file' part" before
        ("multipart/form-data; boundary=xx", part + GOOD, "cut off"),
        ("multipart/form-data; boundary=xx", whole[:60], "cut off"),
        ('multipart/form-data; boundary="xx"', whole[: len(part) + 5], "cut off"),
    ]
    for url in ("/v1/datasets", f"/v1/models/{v['id']}/predict.csv"):
        for ctype, body, words in cases:
            r = api.client.post(url, content=body, headers={**api.h(), "content-type": ctype})
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["code"] == "malformed_multipart" and err["details"][0]["field"] == "body", err
            assert words in err["message"], err
        r = api.client.post(url, files={"file": ("", GOOD, "text/csv")}, headers=api.h())
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["details"][0]["field"] == "file" and "no file name" in err["message"], err
    assert api.count("datasets") == 0 and api.count("audit_log") == 0


@pytest.mark.parametrize(
    ("filename", "name", "expected"),
    [
        (" ", None, "dataset"),
        (".csv", None, "dataset"),
        ("C:\\exports\\loans 2026.csv.gz", None, "loans 2026"),
        ("heart.csv", "  ", "heart"),
        ("heart.csv", "  cardiology  ", "cardiology"),
    ],
)
def test_the_dataset_name_from_blank_names_and_odd_file_names(
    sqlite_api, filename: str, name: str | None, expected: str
) -> None:
    """A file name of " " or ".csv" named the dataset " " and ".csv"; a Windows path kept its folders; a name
    of blanks was kept as blanks. The name now comes without surrounding blanks, from the file name's
    stem when none is given, and is "dataset" when nothing is left."""
    data = b"a,t\n1,0\n2,1\n"
    files = {"file": (filename, data if not filename.endswith(".gz") else gzip.compress(data), "text/csv")}
    r = sqlite_api.client.post(
        "/v1/datasets", files=files, data={"name": name} if name else None, headers=sqlite_api.h()
    )
    assert r.status_code == 201, r.text
    assert r.json()["name"] == expected


def test_a_form_field_given_twice_or_unknown_is_a_422_naming_it(sqlite_api, doc) -> None:
    """`-F name=first -F name=second` stored the dataset as "second", a misspelt `-F nmae=typo` was ignored
    and predict.csv took any extra field or a second `file` part: each silently not what was sent. Now a 422
    naming the field, as for a query parameter given twice or unknown; nothing stored or decided."""
    api = sqlite_api
    v = api.import_model(doc)
    csv = ("d.csv", b"age,income,smoker\n61,20,yes\n", "text/csv")
    cases = [
        (
            "/v1/datasets",
            [("file", csv), ("name", (None, "first")), ("name", (None, "second"))],
            "name",
            "give it once",
        ),
        ("/v1/datasets", [("file", csv), ("nmae", (None, "typo"))], "nmae", "this upload takes file, name"),
        (f"/v1/models/{v['id']}/predict.csv", [("file", csv), ("name", (None, "x"))], "name", "takes file"),
        (f"/v1/models/{v['id']}/predict.csv", [("file", (None, "a")), ("file", csv)], "file", "give it once"),
        # a second file part was a 400 "Too many files" from the parser, naming no field
        ("/v1/datasets", [("file", csv), ("file", csv)], "file", "given 2 times"),
        (f"/v1/models/{v['id']}/predict.csv", [("file", csv), ("file", csv)], "file", "given 2 times"),
        ("/v1/datasets", [("file", csv), ("data", csv)], "data", "unknown form field"),
        ("/v1/datasets", [("file", csv)] + [(f"f{i}", (None, "x")) for i in range(11)], "f0", "unknown form field"),
        ("/v1/datasets", [("file", csv)] + [(f"f{i}", (None, "x")) for i in range(40)], "body", "more parts than"),
        ("/v1/datasets", [("file", csv)] * 3, "body", "send each once"),
    ]
    for url, files, field, words in cases:
        r = api.client.post(url, files=files, headers=api.h())
        assert r.status_code == 422, (url, files, r.text)
        err = r.json()["error"]
        assert err["code"] == "invalid_input" and err["details"][0]["field"] == field, err
        assert words in err["message"], err
    assert api.count("datasets") == 0 and api.count("audit_log") == 0
    r = api.client.post("/v1/datasets", files=[("file", csv), ("name", (None, "once"))], headers=api.h())
    assert r.status_code == 201 and r.json()["name"] == "once", r.text


def test_a_file_name_over_the_parsers_header_limit_is_named_as_the_problem(sqlite_api) -> None:
    """A 5,000-character file name answered `400 malformed_multipart "Invalid multipart data."`, which does not
    say what to change; the message now names the file name. A long one within the limit is kept (cut)."""
    api = sqlite_api
    r = upload(api, GOOD, filename="a" * 5000 + ".csv")
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "malformed_multipart" and "file name" in err["message"], err
    assert api.count("datasets") == 0
    r = upload(api, GOOD, filename="b" * 3000 + ".csv")
    assert r.status_code == 201, r.text
    assert r.json()["name"] == "b" * 200 and r.json()["filename"] == "b" * 300, r.json()


def test_a_list_page_and_its_total_come_from_one_snapshot(sqlite_api) -> None:
    """The page and the total were read by two statements: a dataset committed between them made `total`
    one more than the items of a list that fits one page (seen under concurrent writes on both databases)."""
    import sqlite3

    from sqlalchemy import event

    for i in range(3):
        assert upload(sqlite_api, GOOD, name=f"d{i}").status_code == 201
    engine = sqlite_api.app.state.service.db.engine
    inserted: list[bool] = []

    def insert_after_the_page(conn, cursor, statement, *args) -> None:  # another process's upload, committed
        if "FROM datasets" in statement and not inserted:
            inserted.append(True)
            other = sqlite3.connect(engine.url.database, isolation_level=None, timeout=10)
            other.execute(
                "INSERT INTO datasets (id, tenant_id, name, filename, sha256, size_bytes, n_rows, n_columns, "
                "columns, blob_key, created_at) VALUES ('ds_late', ?, 'late', 'l.csv', '', 0, 1, 1, '[]', '', "
                "'2026-01-01 00:00:00')",
                (sqlite_api.tenant_a,),
            )
            other.close()

    event.listen(engine, "after_cursor_execute", insert_after_the_page)
    try:
        page = sqlite_api.client.get("/v1/datasets", headers=sqlite_api.h()).json()
    finally:
        event.remove(engine, "after_cursor_execute", insert_after_the_page)
    assert inserted
    assert page["total"] == len(page["items"]) == 3, page
    assert sqlite_api.client.get("/v1/datasets", headers=sqlite_api.h()).json()["total"] == 4


def test_an_upload_without_room_on_the_servers_disk_is_a_503_naming_it(api, monkeypatch) -> None:
    """The multipart parser spools a file past 1 MiB to disk; a full disk there answered 400 `malformed_multipart`,
    blaming the client's body. It is a 503 naming the server's temporary storage, and nothing is created."""
    import errno

    import starlette.datastructures

    real = starlette.datastructures.UploadFile.write

    async def full(self, data: bytes) -> None:
        if self.file.tell() + len(data) > 1024 * 1024:
            raise OSError(errno.ENOSPC, "No space left on device")
        await real(self, data)

    monkeypatch.setattr(starlette.datastructures.UploadFile, "write", full)
    r = upload(api, b"age,smoker,income,risk\n" + b"61,yes,20,high\n35,no,80,low\n" * 50_000)
    assert r.status_code == 503, r.text
    err = r.json()["error"]
    assert err["code"] == "temporary_storage_unavailable" and "No space left on device" in err["message"]
    assert api.count("datasets") == 0 and api.count("blobs") == 0
    assert upload(api, GOOD).status_code == 201  # a small file stays in memory: served as before
