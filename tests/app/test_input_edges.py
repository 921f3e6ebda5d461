"""Edge inputs found in review: non-finite / out-of-range numbers, NUL characters, huge integers.

Each must be a 4xx naming the field (never a 500, never invalid JSON, never a row left behind), on
SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import gzip
import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

HUGE = int("9" * 400)  # a JSON integer that does not fit a float


def _client(api) -> TestClient:
    return TestClient(api.app, raise_server_exceptions=False)


def _predict_raw(api, ref: str, body: str, **params):
    return _client(api).post(
        f"/v1/models/{ref}/predict",
        content=body,
        params=params,
        headers={**api.h(), "content-type": "application/json"},
    )


def test_non_finite_and_huge_record_values(api, doc) -> None:
    v = api.import_model(doc)["id"]
    cases = [
        ('{"age": ' + str(HUGE) + ', "income": 1, "smoker": "yes"}', "records[0].age"),
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


def _digests(api) -> list[str]:
    with api.app.state.service.db.engine.connect() as c:
        return [row[0] for row in c.execute(text("SELECT input_digest FROM audit_log ORDER BY id"))]


def test_nan_is_decided_echoed_and_audited_as_null(api, doc) -> None:
    """NaN was decided as missing but echoed as null and digested over the text `NaN`, so the audit digest of
    a record differed from the same record sent with null (and from a `NaN` CSV cell's). Now it is null
    throughout: the same rule, the same explanation, the same digest."""
    v = api.import_model(doc)["id"]
    answers = []
    for value in ("NaN", "null"):
        body = '{"records": [{"age": ' + value + ', "income": 1, "smoker": ' + value + "}]}"
        r = _predict_raw(api, v, body)
        assert r.status_code == 200, r.text
        answers.append({k: x for k, x in r.json()["predictions"][0].items() if k != "audit_seq"})
    assert answers[0] == answers[1]
    csv_answer = api.client.post(
        f"/v1/models/{v}/predict.csv",
        headers=api.h(),
        files={"file": ("b.csv", b"age,income,smoker\nNaN,1,NaN\n", "text/csv")},
    )
    assert csv_answer.status_code == 200, csv_answer.text
    nan_json, null_json, nan_csv = _digests(api)
    assert nan_json == null_json == nan_csv


@pytest.mark.parametrize("n_records", [1, 9])
def test_a_huge_integer_for_a_categorical_field_is_decided_as_its_csv_cell(api, doc, n_records: int) -> None:
    """An integer beyond a double for a categorical field was a 500 (OverflowError making its category key).
    It is a category like any other now, keyed by its digits as the same CSV cell is: an unseen one, named."""
    v = api.import_model(doc)["id"]
    rec = '{"age": 1, "income": 1, "smoker": ' + str(HUGE) + "}"
    for explain in ("true", "false"):
        r = _predict_raw(api, v, '{"records": [' + ",".join([rec] * n_records) + "]}", explain=explain)
        assert r.status_code == 200, r.text
        answer = json.loads(r.text)["predictions"][0]
        assert answer["unseen_categories"] == {"smoker": HUGE} and answer["rule_id"] == 2, answer
    csv_row = f"age,income,smoker\n1,1,{HUGE}\n".encode()
    r = api.client.post(f"/v1/models/{v}/predict.csv", headers=api.h(), files={"file": ("b.csv", csv_row, "text/csv")})
    assert r.status_code == 200 and r.text.splitlines()[1].split(",")[3] == "2", r.text


def test_the_message_does_not_count_problems_it_stopped_counting(sqlite_api, doc) -> None:
    """5,000 bad records said "(and 50 more problem(s))": the check stops after 51, so the count was wrong."""
    v = sqlite_api.import_model(doc)["id"]
    rec = '{"age": "x", "income": 1, "smoker": "yes"}'
    r = _predict_raw(sqlite_api, v, '{"records": [' + ",".join([rec] * 5000) + "]}")
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert "50 more" not in err["message"] and "the first 50 are listed" in err["message"], err
    assert len(err["details"]) == 50
    r = _predict_raw(sqlite_api, v, '{"records": [' + ",".join([rec] * 3) + "]}")
    assert "(and 2 more problem(s))" in r.json()["error"]["message"]


def test_a_record_that_is_not_an_object_is_named_by_its_json_type(sqlite_api, doc) -> None:
    """`{"records": [null, 1]}` said "got NoneType" / "got int": Python's names, not JSON's."""
    v = sqlite_api.import_model(doc)["id"]
    r = _predict_raw(sqlite_api, v, '{"records": [null, 1]}')
    assert r.status_code == 422, r.text
    messages = [d["message"] for d in r.json()["error"]["details"]]
    assert messages == ["must be an object, got null", "must be an object, got number"], messages


def test_csv_batch_rejects_infinite_numbers(api, doc) -> None:
    v = api.import_model(doc)["id"]
    before = api.count("audit_log")
    r = api.client.post(
        f"/v1/models/{v}/predict.csv",
        headers=api.h(),
        files={"file": ("b.csv", b"age,income,smoker\n70,5,yes\ninf,3,no\n", "text/csv")},
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "line 3.age"
    assert api.count("audit_log") == before


def test_upload_with_infinite_numbers_is_refused(api) -> None:
    r = _client(api).post(
        "/v1/datasets", headers=api.h(), files={"file": ("i.csv", b"a,b,t\n1,2,0\n2,-inf,1\n", "text/csv")}
    )
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "csv_non_finite" and "'b': row 1 (line 3) has '-inf'" in err["message"]
    assert api.count("datasets") == 0 and api.count("blobs") == 0


def test_out_of_range_integers_are_4xx(api, doc) -> None:
    api.import_model(doc)
    c = _client(api)
    for path, params in [
        ("/v1/audit", {"before_seq": 10**20}),
        ("/v1/datasets", {"offset": 10**20}),
        ("/v1/jobs", {"offset": 10**20}),
        ("/v1/models", {"offset": 10**20}),
        ("/v1/registered-models", {"offset": 10**20}),
    ]:
        r = c.get(path, params=params, headers=api.h())
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["details"][0]["field"] in ("query.before_seq", "query.offset")
    r = c.put("/v1/registered-models/risk/aliases/prod", json={"version": 10**20}, headers=api.h())
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "version", r.text
    assert api.count("model_aliases") == 0
    for ref in ("risk@99999999999999999999999", "risk@2147483648"):
        assert c.get(f"/v1/models/{ref}", headers=api.h()).status_code == 404
        r = c.post(
            f"/v1/models/{ref}/predict", json={"records": [{"age": 1, "income": 1, "smoker": "x"}]}, headers=api.h()
        )
        assert r.status_code == 404, r.text


def test_nul_characters_are_4xx(api, doc) -> None:
    v = api.import_model(doc)["id"]
    c = _client(api)
    for path in (
        "/v1/datasets/x%00",
        "/v1/jobs/x%00",
        "/v1/models/x%00",
        "/v1/models/risk@a%00",
        "/v1/registered-models/risk%00",
    ):
        r = c.get(path, headers=api.h())
        assert r.status_code in (404, 422), (path, r.text)
    r = c.get("/v1/jobs", params={"model_name": "x\x00"}, headers=api.h())
    assert r.status_code in (200, 422), r.text
    r = c.post("/v1/jobs", json={"dataset_id": "x\x00", "target": "t"}, headers=api.h())
    assert r.status_code in (404, 422), r.text
    r = c.put("/v1/registered-models/risk/aliases/prod", json={"version_id": v + "\x00"}, headers=api.h())
    assert r.status_code in (404, 422), r.text
    r = c.post(
        "/v1/datasets",
        files={"file": ("i.csv", b"a,b,t\n1,2,0\n2,3,1\n", "text/csv")},
        data={"name": "x\x00"},
        headers=api.h(),
    )
    assert r.status_code in (201, 422), r.text
    if r.status_code == 422:
        assert api.count("datasets") == 0 and api.count("blobs") == 0
    assert api.count("jobs") == 0 and api.count("model_aliases") == 0


def test_import_refuses_nan_and_infinity(api, doc) -> None:
    c = _client(api)
    h = {**api.h(), "content-type": "application/json"}
    d = json.loads(json.dumps(doc))
    d["metadata"] = {"val": float("nan")}
    for body, field in [
        ({"name": "n", "rule_list": d}, "rule_list.metadata.val"),
        ({"name": "n", "rule_list": doc, "metrics": {"f1": [1.0, float("inf")]}}, "metrics.f1[1]"),
    ]:
        r = c.post("/v1/models", content=json.dumps(body), headers=h)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"][0]["field"] == field
    assert api.count("model_versions") == 0 and api.count("registered_models") == 0


def test_job_options_refuse_nan(api) -> None:
    ds = (
        _client(api)
        .post(
            "/v1/datasets",
            headers=api.h(),
            files={"file": ("d.csv", b"a,t\n" + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(20)), "text/csv")},
        )
        .json()
    )
    body = '{"dataset_id": "' + ds["id"] + '", "target": "t", "parameters": {"options": {"lr": NaN}}}'
    r = _client(api).post("/v1/jobs", content=body, headers={**api.h(), "content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"].startswith("parameters.options.lr")
    assert api.count("jobs") == 0


def test_csv_batch_without_audit_is_503(sqlite_api, doc, monkeypatch) -> None:
    from app.services import audit

    v = sqlite_api.import_model(doc)["id"]

    def broken(engine, rows) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(audit, "write_rows", broken)
    r = _client(sqlite_api).post(
        f"/v1/models/{v}/predict.csv",
        headers=sqlite_api.h(),
        files={"file": ("b.csv", b"age,income,smoker\n70,5,yes\n", "text/csv")},
    )
    assert r.status_code == 503 and r.json()["error"]["code"] == "audit_unavailable", r.text


def test_import_refuses_integers_beyond_float_range(api, doc) -> None:
    c = _client(api)
    h = {**api.h(), "content-type": "application/json"}
    for mutate, field in [
        (lambda d: d["rules"][0]["conditions"][0].__setitem__("low", HUGE), "rule_list.rules[0].conditions[0].low"),
        (lambda d: d["features"][0].__setitem__("fill_value", HUGE), "rule_list.features[0].fill_value"),
        (lambda d: d.__setitem__("smoothing", HUGE), "rule_list.smoothing"),
    ]:
        d = json.loads(json.dumps(doc))
        mutate(d)
        r = c.post("/v1/models", content=json.dumps({"name": "n", "rule_list": d}), headers=h)
        assert r.status_code == 422, r.text
        assert r.json()["error"]["details"][0]["field"] == field
    assert api.count("model_versions") == 0 and api.count("registered_models") == 0


def test_job_seed_beyond_64_bits_is_refused_at_creation(api) -> None:
    ds = (
        _client(api)
        .post(
            "/v1/datasets",
            headers=api.h(),
            files={"file": ("d.csv", b"a,t\n" + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(20)), "text/csv")},
        )
        .json()
    )
    r = _client(api).post(
        "/v1/jobs",
        json={"dataset_id": ds["id"], "target": "t", "parameters": {"random_state": 10**20}},
        headers=api.h(),
    )
    assert r.status_code == 422, r.text  # the learner's seed is 64-bit: the job would only fail later
    assert r.json()["error"]["details"][0]["field"] == "parameters.random_state"
    assert api.count("jobs") == 0 and api.queue.sent == []


def test_job_on_a_very_long_target_name_is_a_422(api) -> None:
    name = "t" * 400
    data = f"a,{name}\n".encode() + b"".join(b"%d,%d\n" % (i, i % 2) for i in range(20))
    ds = _client(api).post("/v1/datasets", headers=api.h(), files={"file": ("d.csv", data, "text/csv")}).json()
    r = _client(api).post("/v1/jobs", json={"dataset_id": ds["id"], "target": name}, headers=api.h())
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "target"
    assert api.count("jobs") == 0


def test_chunked_bodies_over_the_limit_are_413(tmp_path, doc) -> None:
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", max_upload_bytes=10_000)
    api = next(gen)
    try:
        v = api.import_model(doc)["id"]
        c = _client(api)
        rec = b'{"age": 1, "income": 2, "smoker": "' + b"x" * 1000 + b'"}'

        def chunks():  # no Content-Length: sent chunked
            yield b'{"records": [' + rec
            for _ in range(200):
                yield b"," + rec
            yield b"]}"

        r = c.post(f"/v1/models/{v}/predict", content=chunks(), headers={**api.h(), "content-type": "application/json"})
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
        assert api.count("audit_log") == 0
        r = c.post(
            f"/v1/models/{v}/predict",
            content=iter([b'{"records": [', rec, b"]}"]),
            headers={**api.h(), "content-type": "application/json"},
        )
        assert r.status_code == 200, r.text  # a small chunked body is fine

        body = (
            b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n'
            b"Content-Type: text/csv\r\n\r\na,b\n" + b"1,2\n" * 20_000 + b"\r\n--xyz--\r\n"
        )

        def body_chunks():
            for i in range(0, len(body), 4096):
                yield body[i : i + 4096]

        r = c.post(
            "/v1/datasets",
            content=body_chunks(),
            headers={**api.h(), "content-type": "multipart/form-data; boundary=xyz"},
        )
        assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
        assert api.count("datasets") == 0 and api.count("blobs") == 0
    finally:
        gen.close()


def test_malformed_json_names_the_body_and_the_position(sqlite_api) -> None:
    r = sqlite_api.client.post(
        "/v1/models/x/predict",
        content=b'{"records": [{"a": 1}',
        headers={**sqlite_api.h(), "content-type": "application/json"},
    )
    assert r.status_code == 422
    err = r.json()["error"]
    assert err["details"][0]["field"] == "body" and "invalid JSON at character 21" in err["message"], err


def test_compressed_json_body_is_named_as_such(sqlite_api, doc) -> None:
    """A gzip JSON body answered 'body: not valid UTF-8 (byte 1); send JSON encoded as UTF-8', which sends a
    client looking for an encoding bug; the answer names the Content-Encoding instead (JSON bodies are read
    as sent; only CSV uploads are decompressed). Nothing is decided or audited."""
    v = sqlite_api.import_model(doc)
    body = gzip.compress(json.dumps({"records": [{"age": 1, "income": 2, "smoker": "no"}]}).encode())
    for encoding in ("gzip", "br"):
        r = sqlite_api.client.post(
            f"/v1/models/{v['id']}/predict",
            content=body,
            headers={**sqlite_api.h(), "content-type": "application/json", "content-encoding": encoding},
        )
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err["code"] == "invalid_input" and err["details"][0]["field"] == "body", err
        assert f"Content-Encoding '{encoding}'" in err["message"] and "UTF-8" not in err["message"], err
    r = sqlite_api.client.post(
        "/v1/jobs",
        content=body,
        headers={**sqlite_api.h(), "content-type": "application/json", "content-encoding": "gzip"},
    )
    assert r.status_code == 422 and "Content-Encoding 'gzip'" in r.json()["error"]["message"], r.text
    assert sqlite_api.count("audit_log") == 0 and sqlite_api.count("jobs") == 0


def test_a_json_body_sent_as_another_content_type_names_the_content_type(sqlite_api, doc) -> None:
    """A JSON object sent as text/plain, as curl's `-d` form type or with no type answered 'body: must be an
    object', blaming a body that is one; the answer names the content type. Nothing is decided or written."""
    api = sqlite_api
    v = api.import_model(doc)
    predict = json.dumps({"records": [{"age": 1, "income": 2, "smoker": "no"}]})
    job = json.dumps({"dataset_id": "ds_x", "target": "risk"})
    for ctype in ("text/plain", "application/x-www-form-urlencoded", None):
        h = {**api.h(), **({"content-type": ctype} if ctype else {})}
        for url, body in ((f"/v1/models/{v['id']}/predict", predict), ("/v1/jobs", job)):
            r = api.client.post(url, content=body, headers=h)
            assert r.status_code == 422, r.text
            err = r.json()["error"]
            assert err["code"] == "invalid_input" and err["details"][0]["field"] == "body", err
            assert "application/json" in err["message"] and "must be an object" not in err["message"], err
            assert (repr(ctype) if ctype else "no content type") in err["message"], err
    r = api.client.post(
        f"/v1/models/{v['id']}/predict", content=b'"x"', headers={**api.h(), "content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["error"]["message"] == "body: must be an object"  # JSON, not an object
    assert api.count("audit_log") == 0 and api.count("jobs") == 0


def test_a_key_given_twice_in_a_json_object_is_a_422_naming_it(sqlite_api, doc) -> None:
    """Every parser keeps the last value of a repeated key: a record `{"age": 70, "age": 20}` was decided (and
    audited) as 20, a job `{"target": "a", "target": "b"}` trained on b, an alias move
    `{"version": 2, "version": 1}` went to 1. Each is now a 422 naming the key's path, and nothing is written."""
    api = sqlite_api
    v = api.import_model(doc)
    before = api.count("audit_log"), api.count("registry_events")
    h = {**api.h(), "content-type": "application/json"}
    cases = [
        (
            "POST",
            f"/v1/models/{v['id']}/predict",
            '{"records": [{"age": 1, "income": 2, "smoker": "no"}, '
            '{"age": 70, "income": 5, "smoker": "yes", "age": 20}]}',
            "records[1].age",
        ),
        (
            "POST",
            f"/v1/models/{v['id']}/predict",
            '{"records": [{"age": 70, "\\u0061ge": 20, "income": 5, "smoker": "yes"}]}',
            "records[0].age",
        ),
        (
            "POST",
            f"/v1/models/{v['id']}/predict",
            '{"records": [{"age": 7, "income": 5, "smoker": "yes"}], "explain": "none", "explain": "rules"}',
            "explain",
        ),
        ("POST", "/v1/jobs", '{"dataset_id": "ds_x", "target": "a", "target": "b"}', "target"),
        ("PUT", "/v1/registered-models/risk/aliases/prod", '{"version": 2, "version": 1}', "version"),
        ("POST", "/v1/models", '{"name": "risk", "name": "other", "rule_list": {}}', "name"),
    ]
    for method, path, body, field in cases:
        r = _client(api).request(method, path, content=body, headers=h)
        assert r.status_code == 422, (path, r.text)
        err = r.json()["error"]
        assert err["code"] == "invalid_input" and err["details"][0]["field"] == field, err
        assert "more than once" in err["message"], err
    assert (api.count("audit_log"), api.count("registry_events")) == before
    assert api.count("jobs") == 0 and api.count("model_versions") == 1
    # a string value that holds `":`, and keys spaced from their colons, are no repeated keys
    ok = '{"records": [{"age" : 70, "income":5, "smoker": "a\\":b"}], "explain" :"none"}'
    r = _predict_raw(api, v["id"], ok)
    assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    ("text", "path"),
    [
        (b'{"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}}', ("b", "c", 1, "d")),
        (b'[{"a": 1}, {"a": 1, "b": 2, "a" : 3}]', (1, "a")),
        (b'{"a": "\\":", "b": "x\\" :"}', None),
        (b'{"a": {}, "b": []}', None),
        (b'"a\\":"', None),
    ],
)
def test_repeated_key_finds_the_first_path_and_nothing_else(text: bytes, path: tuple | None) -> None:
    from app.http.jsonbody import repeated_key

    assert repeated_key(text, json.loads(text)) == path


def test_repeated_keys_are_looked_for_without_a_500_or_a_blocked_loop_and_after_the_key(sqlite_api, doc) -> None:
    """Review findings on the repeated-key check: a body nested 1,000 deep was a 500 (RecursionError in the key
    count; it had been a 422); a UTF-16 body could slip a repeated key past the byte count; a repeated key on
    predict was a 422 before the API key was checked (a 401 on every other route)."""
    api = sqlite_api
    v = api.import_model(doc)
    h = {**api.h(), "content-type": "application/json"}
    deep = "[" * 1000 + "]" * 1000
    for method, path, body in [
        ("POST", f"/v1/models/{v['id']}/predict", '{"records": ' + deep + "}"),
        ("POST", f"/v1/models/{v['id']}/predict", '{"records": ' + deep + ', "note": "a\\":b"}'),
        ("POST", "/v1/jobs", '{"dataset_id": "ds_x", "target": "t", "parameters": ' + deep + "}"),
    ]:
        r = _client(api).request(method, path, content=body, headers=h)
        assert r.status_code in (400, 422), (path, r.status_code, r.text[:300])
    sneaky = '{"records": [{"age": 70, "income": 5, "smoker": "yes\u3a22\u3a22\u3a22\u3a22", "age": 20}]}'
    r = _client(api).post(f"/v1/models/{v['id']}/predict", content=sneaky.encode("utf-16"), headers=h)
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "records[0].age", r.text
    twice = '{"records": [{"age": 1, "age": 2, "income": 5, "smoker": "no"}]}'
    for path in (f"/v1/models/{v['id']}/predict", "/v1/jobs"):
        r = _client(api).post(path, content=twice, headers={"content-type": "application/json"})
        assert r.status_code == 401, (path, r.text)


def test_the_path_of_a_repeated_key_is_found_in_a_deep_value_without_recursion() -> None:
    from app.http.jsonbody import find_repeated_key, keys_match

    deep = b'{"a": ' + b"[" * 950 + b'{"k": 1, "k": 2}' + b"]" * 950 + b"}"
    assert find_repeated_key(deep) == ("a", *([0] * 950), "k")
    flat = b'{"a": ' + b"[" * 950 + b'{"k": 1}' + b"]" * 950 + b"}"
    assert keys_match(flat, json.loads(flat)) and find_repeated_key(flat) is None
    assert keys_match('{"a": 1}'.encode("utf-16"), {"a": 1})  # UTF-16 (the stdlib reads it) is counted as UTF-8
    assert not keys_match('{"a": 1, "a": 2}'.encode("utf-32"), {"a": 2})


def test_the_exact_count_needs_no_second_parse_and_a_large_body_names_its_repeat_without_a_path() -> None:
    from app.http import jsonbody

    text = b'{"note": "a\\":b \\\\", "x": [{"a": 1}, {"b": "\\"c\\":"}]}'  # strings holding '":' and escapes
    assert text.count(b'":') != 4 and jsonbody.keys_match(text, json.loads(text))
    big = b'{"note": "a\\":b", "x": [' + b",".join([b'{"a": 1}'] * 200_000) + b', {"a": 1, "a": 2}]}'
    assert len(big) > jsonbody.PATH_SEARCH_MAX and jsonbody.repeated_key(big, json.loads(big)) == ()
    assert "a key of an object" in jsonbody.repeated_key_error(())["msg"]


def test_wide_bodies_with_lone_surrogates_are_counted_as_the_parser_reads_them() -> None:
    """json.loads reads UTF-16/32 with lone surrogates; the count read them strictly, failed, and counted the wide
    bytes, where code units such as U+3A22 ('":' in UTF-16-LE) and U+5C41 (a backslash byte) misled it."""
    from app.http.jsonbody import PATH_SEARCH_MAX, repeated_key

    for codec in ("utf-16-le", "utf-16-be", "utf-32"):
        text = '{"target": "\u3a22\ud800\u3a41", "target": "y", "dataset_id": "d"}'
        raw = text.encode(codec, "surrogatepass")
        assert repeated_key(raw, json.loads(raw)) == ("target",), codec
    big = ('{"target": "\ud800\u5c41\u5c41", "description": "' + "x" * PATH_SEARCH_MAX + '"}').encode(
        "utf-16-le", "surrogatepass"
    )
    assert repeated_key(big, json.loads(big)) is None  # no repeat: no false 422


def test_a_lone_surrogate_in_a_body_is_a_422_naming_where_and_nothing_is_stored(api, doc) -> None:
    """A lone surrogate escape (`"\\ud800"`) in a record's key was a 500 (the error response could not be
    encoded); in an imported model's metrics it stored the version and then answered 500, and every later
    read of that version or of the model list was a 500 too."""
    v = api.import_model(doc)["id"]
    rec = '{"age": 1, "income": 1, "smoker": "yes", "\\ud800": 1}'
    r = _predict_raw(api, v, '{"records": [' + rec + "]}")
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "records[0].\\ud800", r.json()
    model = json.dumps({"name": "imp", "rule_list": doc, "metrics": {"acc": "\ud800"}})
    r = _client(api).post("/v1/models", content=model, headers={**api.h(), "content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "metrics.acc", r.json()
    assert _client(api).get("/v1/registered-models/imp", headers=api.h()).status_code == 404
    assert _client(api).get("/v1/models?limit=500", headers=api.h()).status_code == 200
    assert api.count("audit_log") == 0


def test_two_different_api_keys_are_refused(sqlite_api, doc) -> None:
    """Two X-API-Key headers with different keys acted as the first one's tenant: one key silently won."""
    v = sqlite_api.import_model(doc)["id"]
    key = sqlite_api.h()["X-API-Key"]
    body = b'{"records": [{"age": 1, "income": 1, "smoker": "yes"}]}'
    for keys in ([key, sqlite_api.key_b], [sqlite_api.key_b, key]):
        headers = [("x-api-key", k) for k in keys] + [("content-type", "application/json")]
        r = _client(sqlite_api).post(f"/v1/models/{v}/predict", content=body, headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "ambiguous_api_key", r.text
        r = _client(sqlite_api).get("/v1/datasets", headers=headers)
        assert r.status_code == 401 and r.json()["error"]["code"] == "ambiguous_api_key", r.text
    same = [("x-api-key", key), ("x-api-key", key), ("content-type", "application/json")]
    assert _client(sqlite_api).post(f"/v1/models/{v}/predict", content=body, headers=same).status_code == 200


def test_a_categorical_string_is_read_as_the_same_csv_cell(api, doc) -> None:
    """JSON decided `" yes "` and `"?"` as values training never saw, while predict.csv reads the same cells as
    `yes` and missing: the same record got another rule by path (96 of 1,872 records in a probe). Now the
    JSON record is read as the CSV cell: the same rule and the same audit digest on both paths."""
    v = api.import_model(doc)["id"]
    cells = [" yes ", "?", "NA", "yes", "", " no"]
    body = json.dumps({"records": [{"age": 70, "income": 50, "smoker": c} for c in cells]})
    r = _predict_raw(api, v, body)
    assert r.status_code == 200, r.text
    by_json = [p["rule_id"] for p in r.json()["predictions"]]
    assert by_json == [1, 0, 0, 1, 0, 0], by_json
    assert all("unseen_categories" not in p for p in r.json()["predictions"])
    text = "age,income,smoker\n" + "".join(f"70,50,{c}\n" for c in cells)
    r = api.client.post(
        f"/v1/models/{v}/predict.csv", headers=api.h(), files={"file": ("b.csv", text.encode(), "text/csv")}
    )
    assert r.status_code == 200, r.text
    by_csv = [int(line.split(",")[3]) for line in r.text.splitlines()[1:]]
    assert by_csv == by_json
    digests = _digests(api)
    assert digests[: len(cells)] == digests[len(cells) :]


def test_a_stored_level_with_blanks_or_a_token_keeps_its_meaning(sqlite_api, doc, monkeypatch) -> None:
    """A version stored before imports refused such levels (a level written with blanks or as a missing-value
    token) still matches that value sent exactly."""
    doc["features"][2]["categories"] = [" yes", "?", None]
    doc["rules"][0]["conditions"][1]["values"] = [" yes", "?"]
    with monkeypatch.context() as m:  # stored as the import of before the check did
        m.setattr("app.services.registry.check_new_document", lambda rl, document=None: None)
        v = sqlite_api.import_model(doc)["id"]
    body = json.dumps({"records": [{"age": 70, "income": 50, "smoker": c} for c in (" yes", "?", "yes")]})
    r = _predict_raw(sqlite_api, v, body)
    assert r.status_code == 200, r.text
    assert [p["rule_id"] for p in r.json()["predictions"]] == [1, 1, 0]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda d: d["features"].append({"name": "a\x00b", "type": "numeric", "fill_value": 0.0}),
            "rule_list.features[3].name",
        ),
        (lambda d: d["features"][2].update(categories=["yes", "no", "yes"]), "rule_list.features[2].categories[2]"),
        (lambda d: d["features"][0].update(min=90.0, max=20.0), "rule_list.features[0].min"),
        # levels no CSV cell or JSON record can reach (blanks dropped, missing tokens read as missing): JSON and
        # predict.csv decided them differently
        (lambda d: d["features"][2].update(categories=["yes", " no", None]), "rule_list.features[2].categories[1]"),
        (lambda d: d["features"][2].update(categories=["yes", "NA", None]), "rule_list.features[2].categories[1]"),
        (
            lambda d: d["rules"][0]["conditions"][1].update(values=["?"]),
            "rule_list.rules[0].conditions[1].values[0]",
        ),
        (
            lambda d: (
                d["features"][1].update(name=" income"),
                d["rules"][1]["conditions"][0].update(feature=" income"),
            ),
            "rule_list.features[1].name",
        ),
        # a misspelt key was dropped: `hgih` read as no upper bound, `smooting` as the default smoothing
        (lambda d: d["rules"][1]["conditions"][0].update(hgih=5.0), "rule_list.rules[1].conditions[0].hgih"),
        (lambda d: d.update(smooting=0.0), "rule_list.smooting"),
        (lambda d: d["features"][0].update(categories=["a"]), "rule_list.features[0].categories"),
        (lambda d: d["rules"][0].update(rule_id=1), "rule_list.rules[0].rule_id"),
        (lambda d: d["default"].update(conditions=[]), "rule_list.default.conditions"),
    ],
)
def test_an_import_that_reading_allows_but_no_client_could_use_is_a_422(sqlite_api, doc, change, field) -> None:
    """A feature name with a NUL was imported (its Python export did not compile, its predict.csv could never
    work); so were a category listed twice and min above max."""
    change(doc)
    r = sqlite_api.client.post("/v1/models", json={"name": "imp", "rule_list": doc}, headers=sqlite_api.h())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_rule_list" and err["details"][0]["field"] == field, err
    assert sqlite_api.count("model_versions") == 0


@pytest.mark.parametrize(("classes", "index"), [(["None", "Severe"], 0), (["low", "NA"], 1), (["A ", "B"], 0)])
def test_an_imported_class_a_label_file_cannot_hold_is_a_422(sqlite_api, doc, classes, index) -> None:
    """Classes `None` / `Severe` were imported; an evaluation then read every `None` cell of the label column as
    missing and scored the `Severe` rows alone (accuracy = Severe's recall, `None` support 0, "missing_target: 4")."""
    doc["classes"] = classes
    r = sqlite_api.client.post("/v1/models", json={"name": "imp", "rule_list": doc}, headers=sqlite_api.h())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_rule_list" and err["details"][0]["field"] == f"rule_list.classes[{index}]", err
    assert repr(classes[index]) in err["message"] and sqlite_api.count("model_versions") == 0
