"""One contract (issue 8, item 5): each bug found in review, pinned by a test that failed before its fix.

Allow on 405, text/plain exports, strict integers, the SQL export (missing '', escaping, schema-qualified
tables), API keys with surrounding spaces, one record numbering and one output naming (CLI, CSV, JSON),
n_rules as a maximum with the kept count reported, and bad parameters answered in plain words.
"""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from models.cli import main as cli_main
from models.rulelist import RuleList

RECORDS = [
    {"age": 67, "income": 50, "smoker": "yes"},
    {"age": 30, "income": 5, "smoker": "no"},
    {"age": None, "income": 40.5, "smoker": None},
]


def _csv(records: list[dict[str, Any]]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(records[0]))
    for rec in records:
        w.writerow(["" if v is None else v for v in rec.values()])
    return buf.getvalue().encode()


# --- HTTP details ----------------------------------------------------------------------------


def test_405_allow_lists_every_method_of_the_path(sqlite_api) -> None:
    c = sqlite_api.client
    r = c.options("/v1/jobs")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, POST"
    r = c.patch("/v1/datasets/ds_x", headers=sqlite_api.h())
    assert r.status_code == 405 and r.headers["allow"] == "DELETE, GET, HEAD"
    r = c.put("/v1/registered-models/m/aliases/prod/extra")
    assert r.status_code == 404
    for page in ("/openapi.json", "/docs", "/console/", "/metrics"):  # outside the schema: `Allow:` was empty
        r = c.options(page)
        assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD", (page, r.headers.get("allow"))


def test_an_encoded_slash_in_a_name_is_a_422_naming_the_path(sqlite_api, doc) -> None:
    """`prod%2Feu` is decoded before routing and splits the path: a 422 saying why, not a bare 404."""
    c, h = sqlite_api.client, sqlite_api.h()
    v = sqlite_api.import_model(doc)
    r = c.put("/v1/registered-models/risk/aliases/prod%2Feu", json={"version_id": v["id"]}, headers=h)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "invalid_input" and "%2F" in r.json()["error"]["message"]
    assert c.get("/v1/models/risk%2fx", headers=h).status_code == 422
    assert c.get("/v1/no-such-thing", headers=h).status_code == 404


def test_head_answers_as_get_without_a_body(sqlite_api, doc) -> None:
    """HEAD on a GET path: the GET's status and headers, no body; on a path without GET, 405 naming the methods."""
    c, h = sqlite_api.client, sqlite_api.h()
    v = sqlite_api.import_model(doc)
    for path, headers in (("/healthz", {}), (f"/v1/models/{v['id']}", h), ("/console/", {}), ("/v1/models", {})):
        got, head = c.get(path, headers=headers), c.head(path, headers=headers)
        assert head.status_code == got.status_code and head.content == b"", (path, head.status_code, head.content)
        assert head.headers.get("content-type") == got.headers.get("content-type"), path
        assert head.headers.get("content-length") == got.headers.get("content-length"), path
    r = c.head(f"/v1/models/{v['id']}/predict", headers=h)
    assert r.status_code == 405 and r.headers["allow"] == "POST" and r.content == b""
    metrics = c.get("/metrics").text  # counted as HEAD, under the route's template
    assert 'method="HEAD",route="/healthz",status="200"' in metrics
    assert 'method="HEAD",route="/v1/models/{ref}",status="200"' in metrics


@pytest.mark.parametrize("fmt", ["text", "sql", "python", "json"])
def test_every_export_is_text_plain_as_documented(sqlite_api, doc, fmt: str) -> None:
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.get(f"/v1/models/{v['id']}/export", params={"format": fmt}, headers=sqlite_api.h())
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8"
    documented = sqlite_api.app.openapi()["paths"]["/v1/models/{ref}/export"]["get"]["responses"]["200"]["content"]
    assert list(documented) == ["text/plain"]


def test_version_true_is_not_version_1(sqlite_api, doc) -> None:
    sqlite_api.import_model(doc)
    r = sqlite_api.client.put(
        "/v1/registered-models/risk/aliases/production", json={"version": True}, headers=sqlite_api.h()
    )
    assert r.status_code == 422 and r.json()["error"]["message"] == "version: must be an integer"
    bad = {**doc, "version": True}
    r = sqlite_api.client.post("/v1/models", json={"name": "risk", "rule_list": bad}, headers=sqlite_api.h())
    assert r.status_code == 422 and "version" in r.json()["error"]["message"]
    assert sqlite_api.count("model_versions") == 1 and sqlite_api.count("model_aliases") == 0


@pytest.mark.parametrize("header", ["X-API-Key", "Authorization"])
def test_api_key_with_spaces_on_either_side_is_accepted(sqlite_api, header: str) -> None:
    for padded in (f" {sqlite_api.key_a}", f"{sqlite_api.key_a} ", f"  {sqlite_api.key_a}\t"):
        value = f"Bearer {padded}" if header == "Authorization" else padded
        r = sqlite_api.client.get("/v1/datasets", headers={header: value})
        assert r.status_code == 200, (repr(value), r.text)
    r = sqlite_api.client.get("/v1/datasets", headers={header: "Bearer  " if header == "Authorization" else "  "})
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"


# --- one numbering, one naming ------------------------------------------------------------------


def test_json_csv_and_cli_number_and_name_records_alike(sqlite_api, doc, tmp_path: Path, capsys) -> None:
    v = sqlite_api.import_model(doc)
    j = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict", json={"records": RECORDS}, params={"explain": False}, headers=sqlite_api.h()
    ).json()["predictions"]
    files = {"file": ("r.csv", _csv(RECORDS), "text/csv")}
    r = sqlite_api.client.post(f"/v1/models/{v['id']}/predict.csv", files=files, headers=sqlite_api.h())
    service_csv = r.text
    (tmp_path / "model.json").write_text(json.dumps(doc))
    (tmp_path / "data.csv").write_bytes(_csv(RECORDS))
    assert cli_main(["predict", str(tmp_path / "model.json"), str(tmp_path / "data.csv")]) == 0
    cli_csv = capsys.readouterr().out

    rows = list(csv.DictReader(io.StringIO(service_csv)))
    assert service_csv.splitlines()[0] == "index,prediction,probability,rule_id,p_low,p_high,audit_seq"
    assert cli_csv.splitlines()[0] + ",audit_seq" == service_csv.splitlines()[0]  # the service adds the audit link
    assert [int(x["index"]) for x in rows] == [p["index"] for p in j] == [0, 1, 2]
    for x, p in zip(rows, j, strict=True):
        assert x["prediction"] == p["prediction"] and int(x["rule_id"]) == p["rule_id"]
        assert float(x["probability"]) == pytest.approx(p["probability"], abs=1e-6)
        assert float(x["p_high"]) == pytest.approx(p["probabilities"]["high"], abs=1e-6)
        assert int(x["audit_seq"]) == p["audit_seq"] + 3  # the JSON call's three decisions came first
    cli_rows = list(csv.DictReader(io.StringIO(cli_csv)))
    assert [(c["index"], c["prediction"], c["rule_id"]) for c in cli_rows] == [
        (x["index"], x["prediction"], x["rule_id"]) for x in rows
    ]


def test_n_rules_is_documented_as_a_maximum(sqlite_api, doc) -> None:
    schema = sqlite_api.app.openapi()["components"]["schemas"]
    assert "MOST" in schema["TrainingParameters"]["properties"]["n_rules"]["description"]
    assert "n_rules" in schema["ModelVersionSummary"]["required"]
    v = sqlite_api.import_model(doc)
    assert v["n_rules"] == len(doc["rules"]) == 2
    listed = sqlite_api.client.get("/v1/models", headers=sqlite_api.h()).json()["items"]
    assert [x["n_rules"] for x in listed] == [2]


# --- bad parameters in plain words ---------------------------------------------------------------


def _job(api, parameters: Any):
    ds = api.client.post(
        "/v1/datasets",
        files={"file": ("t.csv", b"a,b,target\n" + b"".join(f"{i},{i % 3},{i % 2}\n".encode() for i in range(30)))},
        headers=api.h(),
    ).json()["id"]
    return api.client.post(
        "/v1/jobs", json={"dataset_id": ds, "target": "target", "parameters": parameters}, headers=api.h()
    )


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        ({"options": {"lr": "abc"}}, "parameters.options.lr: must be a number"),
        ({"options": {"lr": True}}, "parameters.options.lr: must be a number"),
        ({"options": {"lr": 0}}, "parameters.options.lr: must be greater than 0.0"),
        ({"n_rules": True}, "parameters.n_rules: must be an integer"),
        ({"n_rules": "5"}, "parameters.n_rules: must be an integer"),
        ({"n_rules": 0}, "parameters.n_rules: must be at least 1"),
        ({"epochs": "many"}, "parameters.epochs: must be a positive integer or 'auto'"),
        ({"epochs": 2.5}, "parameters.epochs: must be a positive integer or 'auto'"),
        ({"test_size": "0.1"}, "parameters.test_size: must be a number"),
        ({"options": {"max_conditions": 0}}, "parameters.options.max_conditions: must be at least 1"),
        ({"options": {"eps": 0.01}}, "parameters.options.eps: must be at most 0.00125"),
        ({"options": {"t_pi": [1.0]}}, "parameters.options.t_pi: must be a [start, end] pair of positive numbers"),
        ({"options": {"n_restarts": 0}}, "parameters.options.n_restarts: must be a positive integer or 'auto'"),
        ({"options": {"turbo": 1, "lr": 0.1}}, "parameters.options: unknown option(s) 'turbo'; known: batch_size"),
        ({"options": {"device": "cuda"}}, "parameters.options: device cannot be set in options"),
        ({"options": {"min_support": 0.95}}, "parameters.options: need 0 <= min_support <= max_support <= 1"),
        ({"bogus": 1}, "parameters.bogus: not a known field"),
        ([], "parameters: must be an object"),
    ],
)
def test_bad_parameters_answer_422_naming_the_field(sqlite_api, parameters: Any, message: str) -> None:
    r = _job(sqlite_api, parameters)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input" and err["message"].startswith(message), err["message"]
    assert sqlite_api.count("jobs") == 0


def test_only_the_options_sent_are_stored(sqlite_api) -> None:
    r = _job(sqlite_api, {"n_rules": 4, "options": {"lr": 0.05, "t_pi": [0.3, 0.05], "max_candidates": None}})
    assert r.status_code == 202, r.text
    assert r.json()["parameters"]["options"] == {"lr": 0.05, "t_pi": [0.3, 0.05], "max_candidates": None}
    assert r.json()["n_rules_kept"] is None


def test_training_options_schema_mirrors_the_learner(sqlite_api) -> None:
    from app.schemas.training import RESERVED_OPTIONS
    from models.estimator import NeuRulesClassifier

    schema = sqlite_api.app.openapi()["components"]["schemas"]
    options = schema["TrainingOptions"]
    learner = [n for n in NeuRulesClassifier._get_param_names() if n not in RESERVED_OPTIONS]
    assert list(options["properties"]) == learner
    assert options["additionalProperties"] is False
    for name, default in NeuRulesClassifier().get_params().items():
        if name in RESERVED_OPTIONS:
            continue
        if default is None:
            shown = "default: "
        elif isinstance(default, tuple):
            shown = f"default [{default[0]}, {default[1]}]"
        elif isinstance(default, str):
            shown = f"default '{default}'"
        else:
            shown = f"default {default}"
        assert shown in options["properties"][name]["description"], (name, shown)
    params = schema["TrainingParameters"]["properties"]["options"]
    assert params["$ref"] == "#/components/schemas/TrainingOptions" or params.get("allOf")


# --- the SQL export -----------------------------------------------------------------------------

NASTY_DOC: dict[str, Any] = {
    "format": "neurules.rulelist",
    "version": 1,
    "target": "y",
    "classes": ["it's no", 'yes \\ "sure"'],
    "features": [
        {"name": 'age "years"', "type": "numeric", "fill_value": 50.0, "min": 0.0, "max": 99.0},
        {"name": "home town", "type": "categorical", "categories": ["O'Hara", "back\\slash", "two\nlines", None]},
    ],
    "rules": [
        {
            "conditions": [
                {"feature": 'age "years"', "op": "between", "low": 60.0, "high": None},
                {"feature": "home town", "op": "in", "values": ["O'Hara", "back\\slash", "two\nlines"]},
            ],
            "class_counts": [1, 9],
            "probabilities": [2 / 12, 10 / 12],
        },
        {
            "conditions": [{"feature": "home town", "op": "in", "values": [None]}],
            "class_counts": [2, 5],
            "probabilities": [3 / 9, 6 / 9],
        },
    ],
    "default": {"class_counts": [30, 3], "probabilities": [31 / 35, 4 / 35]},
    "smoothing": 1.0,
    "metadata": {},
}
# values as a CSV loader leaves them in text columns: blanks are '' (missing, as the document says)
SQL_ROWS: list[tuple[str, str]] = [
    ("70", "O'Hara"),
    ("70", "back\\slash"),
    ("61.5", "two\nlines"),
    ("", "O'Hara"),  # age missing -> 50 -> rule 1 fails
    ("80", ""),  # town missing -> rule 2
    ("80", "Dublin"),
    ("  ", "O'Hara"),  # a blank number is missing too
]


def _expected(rl: RuleList) -> list[int]:
    records = [{'age "years"': a if a.strip() else None, "home town": t or None} for a, t in SQL_ROWS]
    return rl.apply(records).tolist()


def test_sql_export_escapes_and_treats_blank_as_missing_sqlite(sqlite_api) -> None:
    v = sqlite_api.import_model(NASTY_DOC, name="nasty")
    sql = sqlite_api.client.get(
        f"/v1/models/{v['id']}/export", params={"format": "sql", "table": "main.people"}, headers=sqlite_api.h()
    ).text
    assert 'FROM "main"."people"' in sql
    con = sqlite3.connect(":memory:")
    con.execute('CREATE TABLE people ("age ""years""" TEXT, "home town" TEXT)')
    con.executemany("INSERT INTO people VALUES (?, ?)", SQL_ROWS)
    got = [row[-1] for row in con.execute(sql)]
    rl = RuleList.from_dict(NASTY_DOC)
    assert got == [rl.prediction_of(i) for i in _expected(rl)]
    assert _expected(rl) == [1, 1, 1, 0, 2, 0, 0]


@pytest.mark.integration
def test_sql_export_runs_on_postgresql_in_a_schema(pg_database) -> None:
    from sqlalchemy import create_engine, text

    rl = RuleList.from_dict(NASTY_DOC)
    eng = create_engine(pg_database)
    try:
        with eng.begin() as c:
            c.execute(text('CREATE SCHEMA IF NOT EXISTS "Sales"'))
            c.execute(text('DROP TABLE IF EXISTS "Sales".people'))
            c.execute(text('CREATE TABLE "Sales".people ("age ""years""" TEXT, "home town" TEXT)'))
            for a, t in SQL_ROWS:
                c.execute(text('INSERT INTO "Sales".people VALUES (:a, :t)'), {"a": a, "t": t})
            got = [row[-1] for row in c.exec_driver_sql(rl.to_sql("Sales.people", output="rule_id"))]
            numeric = 'CREATE TABLE "Sales".nums ("age ""years""" DOUBLE PRECISION, "home town" TEXT)'
            c.execute(text(numeric))
            c.execute(text("INSERT INTO \"Sales\".nums VALUES (70, 'O''Hara'), (NULL, '')"))
            nums = [row[-1] for row in c.exec_driver_sql(rl.to_sql("Sales.nums", output="rule_id"))]
            c.execute(text('DROP SCHEMA "Sales" CASCADE'))
    finally:
        eng.dispose()
    assert got == _expected(rl)
    assert nums == [1, 2]


def test_sql_export_refuses_what_sql_cannot_name(sqlite_api, doc) -> None:
    v = sqlite_api.import_model(doc)
    for table in ("public..heart", "a.b.c.d", " "):
        r = sqlite_api.client.get(
            f"/v1/models/{v['id']}/export", params={"format": "sql", "table": table}, headers=sqlite_api.h()
        )
        assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "query.table", (table, r.text)
    with pytest.raises(ValueError, match="NUL"):
        RuleList.from_dict(doc).to_sql("t\x00")


@pytest.mark.parametrize(
    ("options", "at_bound", "words"),
    [
        ({"n_restarts": 1, "t_rl": [1e308, 0.2]}, {"t_rl": [1e6, 0.2]}, "each from 1e-06 to 1e+06"),
        ({"t_pi": [1e39, 0.04]}, {"t_pi": [1e6, 0.04]}, "each from 1e-06 to 1e+06"),
        ({"t_pi": [1, 1e-320]}, {"t_pi": [1, 1e-6]}, "each from 1e-06 to 1e+06"),  # a denormal: 0 in float32
        ({"t_rl": [1.0, 1e-20]}, {"t_rl": [1.0, 1e-6]}, "each from 1e-06 to 1e+06"),  # trained to NaN
        ({"lr": 1e308}, {"lr": 10.0}, "must be at most 10"),
        ({"lr": 1e39}, {"lr": 10.0}, "must be at most 10"),
        ({"lambda_support": 1e300}, {"lambda_support": 1e6}, "must be at most 1000000"),
        ({"eps": 1e-320}, {"eps": 1e-30}, "must be at least 1e-30"),
    ],
)
def test_options_beyond_float32_answer_422_naming_the_option(
    sqlite_api, options: dict[str, Any], at_bound: dict[str, Any], words: str
) -> None:
    """t_rl [1e308, 0.2] was accepted (202), then the job failed "RuntimeError: value cannot be converted to type
    float without overflow"; lr 1e308 or lambda_support 1e300 trained to NaN and "succeeded" with no rules.
    The bound itself is accepted."""
    r = _job(sqlite_api, {"epochs": 2, "options": options})
    assert r.status_code == 422, r.text
    detail = r.json()["error"]["details"][0]
    field = next(iter(at_bound))
    assert detail["field"] == f"parameters.options.{field}" and words in detail["message"], detail
    assert sqlite_api.count("jobs") == 0
    r = _job(sqlite_api, {"epochs": 2, "options": at_bound})
    assert r.status_code == 202, r.text
    assert r.json()["parameters"]["options"] == at_bound
