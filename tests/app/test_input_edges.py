"""Edge inputs found in review: non-finite / out-of-range numbers, NUL characters, huge integers.

Each must be a 4xx naming the field (never a 500, never invalid JSON, never a row left behind), on
SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

HUGE = int("9" * 400)  # a JSON integer that does not fit a float


def _client(api) -> TestClient:
    return TestClient(api.app, raise_server_exceptions=False)


def _predict_raw(api, ref: str, body: str, **params):
    return _client(api).post(f"/v1/models/{ref}/predict", content=body, params=params,
                             headers={**api.h(), "content-type": "application/json"})


def test_non_finite_and_huge_record_values(api, doc) -> None:
    v = api.import_model(doc)["id"]
    cases = [
        ('{"age": %d, "income": 1, "smoker": "yes"}' % HUGE, "records[0].age"),
        ('{"age": 1, "income": 1, "smoker": Infinity}', "records[0].smoker"),
        ('{"age": 1, "income": 1, "smoker": -Infinity}', "records[0].smoker"),
    ]
    before = api.count("audit_log")
    for rec, field in cases:
        for explain in ("true", "false"):
            body = '{"records": [' + ",".join([rec] * 9) + "]}"
            r = _predict_raw(api, v, body, explain=explain)
            assert r.status_code == 422, r.text
            err = r.json()["error"]
            assert err["code"] == "invalid_record" and err["details"][0]["field"] == field, err
    assert api.count("audit_log") == before
    # NaN stays a missing value, and the answer is valid JSON
    r = _predict_raw(api, v, '{"records": [{"age": NaN, "income": 1, "smoker": NaN}]}')
    assert r.status_code == 200, r.text
    json.loads(r.text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


def test_csv_batch_rejects_infinite_numbers(api, doc) -> None:
    v = api.import_model(doc)["id"]
    before = api.count("audit_log")
    r = api.client.post(f"/v1/models/{v}/predict.csv", headers=api.h(),
                        files={"file": ("b.csv", b"age,income,smoker\n70,5,yes\ninf,3,no\n", "text/csv")})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "line 3.age"
    assert api.count("audit_log") == before


def test_upload_with_infinite_numbers_is_refused(api) -> None:
    r = _client(api).post("/v1/datasets", headers=api.h(),
                          files={"file": ("i.csv", b"a,b,t\n1,2,0\n2,-inf,1\n", "text/csv")})
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "csv_non_finite" and "'b'" in err["message"] and "row 2" in err["message"]
    assert api.count("datasets") == 0 and api.count("blobs") == 0
