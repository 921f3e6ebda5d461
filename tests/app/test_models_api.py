"""Model versions (import, get, list, export) and named models with movable aliases."""

from __future__ import annotations

from typing import Any

import pytest


def test_import_get_and_versions_increment(api, doc: dict[str, Any]) -> None:
    v1 = api.import_model(doc)
    v2 = api.import_model(doc)
    assert (v1["version"], v2["version"]) == (1, 2) and v1["name"] == "risk"
    assert v1["text"].startswith("if ") and "else" in v1["text"]
    assert [f["name"] for f in v1["input_schema"]] == ["age", "income", "smoker"]
    assert v1["provenance"]["source"] == "import"
    got = api.client.get(f"/v1/models/{v1['id']}", headers=api.h()).json()
    assert got["rule_list"] == v1["rule_list"]
    assert api.client.get("/v1/models/risk@latest", headers=api.h()).json()["id"] == v2["id"]
    assert api.client.get("/v1/models/risk@1", headers=api.h()).json()["id"] == v1["id"]
    lst = api.client.get("/v1/models?name=risk", headers=api.h()).json()
    assert lst["total"] == 2 and {i["version"] for i in lst["items"]} == {1, 2}


def test_a_versions_text_is_rendered_from_its_document(api, doc: dict[str, Any]) -> None:
    """A version stored by an older renderer kept its `text` (thresholds such as 1.7e+09) while explanations
    and exports render the document now: the text served is the document's, rendered as they are."""
    from sqlalchemy import text as sql

    v = api.import_model(doc)
    export = api.client.get(f"/v1/models/{v['id']}/export", params={"format": "text"}, headers=api.h()).text
    with api.app.state.service.db.engine.begin() as c:
        c.execute(sql("UPDATE model_versions SET text = 'if x <= 1.7e+09 then stale' WHERE id = :id"), {"id": v["id"]})
    got = api.client.get(f"/v1/models/{v['id']}", headers=api.h()).json()
    assert got["text"] == v["text"] == export.rstrip("\n"), got["text"]


def test_invalid_document_is_422_naming_the_path(api, doc: dict[str, Any]) -> None:
    doc["rules"][0]["conditions"][0]["low"] = "sixty"
    r = api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h())
    assert r.status_code == 422 and "rules[0].conditions[0].low" in r.json()["error"]["message"]
    assert api.count("model_versions") == 0 and api.count("registered_models") == 0


def test_classes_with_the_same_text_are_refused(api, doc: dict[str, Any]) -> None:
    """`1` and `"1"` (or `true` and `"true"`) are distinct JSON values but one key of `probabilities` and one
    `p_<class>` column: such a document was stored, then answers lost a class's probability and evaluations
    answered 500. It is refused at import, naming `rule_list.classes`, and nothing is written."""
    for classes in ([1, "1"], [True, "true"]):
        doc["classes"] = classes
        r = api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h())
        assert r.status_code == 422, (classes, r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == "invalid_rule_list" and err["details"][0]["field"] == "rule_list.classes", err
        assert repr(classes[1]) in err["message"], err
    assert api.count("model_versions") == 0 and api.count("registered_models") == 0
    doc["classes"] = [1, "one"]  # distinct as text: fine
    assert api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h()).status_code == 201


def test_aliases_move(api, doc: dict[str, Any]) -> None:
    v1, v2 = api.import_model(doc), api.import_model(doc)
    r = api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=api.h())
    assert r.status_code == 200 and r.json()["version_id"] == v1["id"]
    assert api.client.get("/v1/models/risk@production", headers=api.h()).json()["id"] == v1["id"]
    r = api.client.put("/v1/registered-models/risk/aliases/production", json={"version_id": v2["id"]}, headers=api.h())
    assert r.json()["version"] == 2
    assert api.client.get("/v1/models/risk@production", headers=api.h()).json()["aliases"] == ["production"]
    named = api.client.get("/v1/registered-models/risk", headers=api.h()).json()
    assert named["aliases"] == {"production": v2["id"]} and named["n_versions"] == 2
    assert api.client.get("/v1/registered-models", headers=api.h()).json()["total"] == 1
    assert api.client.delete("/v1/registered-models/risk/aliases/production", headers=api.h()).status_code == 204
    assert api.client.get("/v1/models/risk@production", headers=api.h()).status_code == 404


def test_alias_errors(api, doc: dict[str, Any]) -> None:
    api.import_model(doc)
    h = api.h()
    assert api.client.put("/v1/registered-models/risk/aliases/prod", json={"version": 9}, headers=h).status_code == 404
    assert api.client.put("/v1/registered-models/nope/aliases/prod", json={"version": 1}, headers=h).status_code == 404
    for reserved in ("latest", "LATEST", "Latest"):  # any case: m@LATEST beside m@latest misleads a case-folding client
        r = api.client.put(f"/v1/registered-models/risk/aliases/{reserved}", json={"version": 1}, headers=h)
        assert r.status_code == 422 and "reserved" in r.json()["error"]["message"], r.text
    # `Production` beside `production`: a look-alike pointing elsewhere (a probe created it while production was v2)
    assert (
        api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=h).status_code
        == 200
    )
    r = api.client.put("/v1/registered-models/risk/aliases/Production", json={"version": 1}, headers=h)
    assert r.status_code == 409 and r.json()["error"]["code"] == "alias_case_conflict", r.text
    assert "risk@production" in r.json()["error"]["message"]
    assert api.client.put("/v1/registered-models/risk/aliases/prod", json={}, headers=h).status_code == 422
    assert (
        api.client.put(
            "/v1/registered-models/risk/aliases/prod", json={"version": 1, "version_id": "x"}, headers=h
        ).status_code
        == 422
    )


def test_names_aliases_and_refs_are_checked_whole(api, doc: dict[str, Any]) -> None:
    """A final newline is not part of a valid name or alias (the check used `$`, which matches before one), and
    a version number is ASCII digits: `risk@²` answered 500 (str.isdigit() holds, int() refuses)."""
    h = api.h()
    r = api.client.post("/v1/models", json={"name": "risk\n", "rule_list": doc}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "name", r.text
    assert api.count("registered_models") == 0
    api.import_model(doc)
    r = api.client.put("/v1/registered-models/risk/aliases/prod%0A", json={"version": 1}, headers=h)
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "alias", r.text
    assert api.client.get("/v1/registered-models/risk", headers=h).json()["aliases"] == {}
    for ref in ("risk@%C2%B2", "risk@%D9%A1"):  # superscript two; Arabic-Indic digit one
        for method, path, kw in (
            ("GET", f"/v1/models/{ref}", {}),
            ("POST", f"/v1/models/{ref}/predict", {"json": {"records": [{"age": 1, "income": 1, "smoker": "no"}]}}),
            ("GET", f"/v1/models/{ref}/monitoring", {}),
            (
                "GET",
                "/v1/models/risk@1/compare",
                {"params": {"other": ref.replace("%C2%B2", "²").replace("%D9%A1", "١")}},
            ),
        ):
            r = api.client.request(method, path, headers=h, **kw)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (method, path, r.text)


def test_alias_to_another_models_version_names_version_id(api, doc: dict[str, Any]) -> None:
    """The 422 named the field `version` (and no field in its message) when the request sent `version_id`."""
    api.import_model(doc)
    other = api.import_model(doc, name="other")
    r = api.client.put("/v1/registered-models/risk/aliases/prod", json={"version_id": other["id"]}, headers=api.h())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"][0]["field"] == "version_id" and err["message"].startswith("version_id: "), err
    assert other["id"] in err["message"] and "'risk'" in err["message"], err


def test_unknown_model_or_alias_and_other_tenant(api, doc: dict[str, Any]) -> None:
    v = api.import_model(doc)
    for ref in ("mv_nope", "nope@production", "risk@production", "risk@7"):
        r = api.client.get(f"/v1/models/{ref}", headers=api.h())
        assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", ref
    assert api.client.get(f"/v1/models/{v['id']}", headers=api.h(api.key_b)).status_code == 404
    assert api.client.get("/v1/models/risk@latest", headers=api.h(api.key_b)).status_code == 404
    assert api.client.get("/v1/registered-models/risk", headers=api.h(api.key_b)).status_code == 404


def test_a_bare_name_or_unknown_alias_says_what_to_send(api, doc: dict[str, Any]) -> None:
    """A registered model's bare name is not a version id: the 404 says how to name a version of it; an unknown
    alias lists the model's aliases and versions. Another tenant learns nothing of them."""
    api.import_model(doc)
    api.import_model(doc)
    assert api.client.put(
        "/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=api.h()
    ).is_success
    for path in ("/v1/models/risk", "/v1/models/risk/export"):
        r = api.client.get(path, headers=api.h())
        assert r.status_code == 404, path
        msg = r.json()["error"]["message"]
        assert "risk@latest" in msg and "risk@production" in msg, msg
    r = api.client.post("/v1/models/risk/predict", json={"records": [{}]}, headers=api.h())
    assert r.status_code == 404 and "risk@latest" in r.json()["error"]["message"]
    r = api.client.get("/v1/models/risk@prod", headers=api.h())
    assert r.status_code == 404
    msg = r.json()["error"]["message"]
    assert "production" in msg and "1..2" in msg, msg
    other = api.client.get("/v1/models/risk", headers=api.h(api.key_b)).json()["error"]["message"]
    assert "latest" not in other and "production" not in other, other


def test_exports(api, doc: dict[str, Any]) -> None:
    v = api.import_model(doc)
    text = api.client.get(f"/v1/models/{v['id']}/export", headers=api.h()).text
    assert text.startswith("if ") and "else" in text
    sql = api.client.get(f"/v1/models/{v['id']}/export?format=sql&table=people", headers=api.h()).text
    assert "CASE" in sql.upper() and "people" in sql
    py = api.client.get(f"/v1/models/{v['id']}/export?format=python", headers=api.h()).text
    ns: dict[str, Any] = {}
    exec(compile(py, "export", "exec"), ns)
    assert callable(ns["predict"])
    assert api.client.get(f"/v1/models/{v['id']}/export?format=xml", headers=api.h()).status_code == 422


def test_an_invalid_document_names_the_element_at_fault(api, doc: dict[str, Any]) -> None:
    """A 422 for an invalid rule list names the element (`rule_list.rules[0].conditions[0].low`), not the document."""
    doc["rules"][0]["conditions"][0] = {**doc["rules"][0]["conditions"][0], "op": "between", "low": "high"}
    r = api.client.post("/v1/models", json={"name": "risk", "rule_list": doc}, headers=api.h())
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "rule_list.rules[0].conditions[0].low", r.json()
    r = api.client.post("/v1/models", json={"name": "risk", "rule_list": [1]}, headers=api.h())
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "rule_list", r.text


def test_a_model_predicts_one_target(api, doc: dict[str, Any]) -> None:
    """A version predicting another column is refused for an existing model (its aliases would move a client
    from one question to another), as an import and as a training job, before anything is written."""
    import copy

    api.import_model(doc)
    other = copy.deepcopy(doc)
    other["target"] = "defaulted"
    r = api.client.post("/v1/models", json={"name": "risk", "rule_list": other}, headers=api.h())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "target_differs" and err["details"][0]["field"] == "rule_list.target"
    assert "'risk'" in err["message"] and "'defaulted'" in err["message"]
    assert api.count("model_versions") == 1
    csv = b"age,income,smoker,defaulted\n" + b"".join(
        f"{20 + i},{i},{'yes' if i % 2 else 'no'},{i % 2}\n".encode() for i in range(40)
    )
    up = api.client.post("/v1/datasets", files={"file": ("d.csv", csv, "text/csv")}, headers=api.h())
    job = {"dataset_id": up.json()["id"], "target": "defaulted", "model_name": "risk"}
    r = api.client.post("/v1/jobs", json=job, headers=api.h())
    assert r.status_code == 422, r.text
    assert r.json()["error"]["code"] == "target_differs" and r.json()["error"]["details"][0]["field"] == "target"
    assert api.count("jobs") == 0 and api.queue.sent == []
    assert api.import_model(other, name="defaulted")["version"] == 1  # under a name of its own
    assert api.client.post("/v1/jobs", json={**job, "model_name": "defaulted"}, headers=api.h()).status_code == 202


def test_an_import_cannot_supply_the_metrics_training_measures(api, doc: dict[str, Any]) -> None:
    """`metrics.holdout_evaluation` supplied with an import was stored and shown as "held-out accuracy per rule
    from the rows training held out": the importer's figures read as measured by the service, and a badly shaped
    one (`rules: [null]`) broke the version page. Each key training writes is refused on import, naming it; any
    other key is kept as sent."""
    from app.services.versions import MEASURED_KEYS

    supplied: dict[str, Any] = {
        "holdout_evaluation": {"n_rows": 100000, "rules": [{"rule_id": 1, "n": 50000, "accuracy": 0.99}]},
        "holdout": {"accuracy": 0.99, "n_rows": 100000},
    }
    for key in MEASURED_KEYS:
        value = supplied.get(key, 3)
        for shaped in (value, {"rules": [None, {"x": 1}]}, "0.9"):
            r = api.client.post(
                "/v1/models", json={"name": "risk", "rule_list": doc, "metrics": {key: shaped}}, headers=api.h()
            )
            assert r.status_code == 422, (key, shaped, r.text)
            err = r.json()["error"]
            assert err["code"] == "invalid_input" and err["details"][0]["field"] == f"metrics.{key}", err
            assert "written by the service" in err["message"], err
    assert api.count("model_versions") == 0 and api.count("registered_models") == 0
    # a bad name is still named first; the importer's own keys are stored as sent
    r = api.client.post(
        "/v1/models", json={"name": " risk", "rule_list": doc, "metrics": {"holdout": {}}}, headers=api.h()
    )
    assert r.status_code == 422 and r.json()["error"]["details"][0]["field"] == "name", r.text
    mine = {"reported_holdout": {"accuracy": 0.9}, "auc": 0.8}
    r = api.client.post("/v1/models", json={"name": "risk", "rule_list": doc, "metrics": mine}, headers=api.h())
    assert r.status_code == 201 and r.json()["metrics"] == mine, r.text


def test_export_refusals_name_the_query_parameter_as_its_other_checks_do(api, doc: dict[str, Any]) -> None:
    """`table=a..b` was refused naming `table`, while its length check names `query.table`; a NUL in `table` was
    named as `table` too, and a NUL the model itself holds as `format` (no `query.`). Every refusal of the export
    now names the query parameter it is about: `query.table` for the table name, `query.format` (saying the
    model holds what SQL cannot) when this model cannot be written in the format asked for."""
    v = api.import_model(doc)
    url = f"/v1/models/{v['id']}/export"
    for table in ("a..b", "a.b.c.d", " ", "a\x00b", "x" * 201):
        r = api.client.get(url, params={"format": "sql", "table": table}, headers=api.h())
        assert r.status_code == 422, (table, r.text)
        err = r.json()["error"]
        assert err["details"][0]["field"] == "query.table" and err["message"].startswith("query.table: "), err
    doc["features"][2]["categories"] = ["ye\x00s", "no", None]
    doc["rules"][0]["conditions"][1]["values"] = ["ye\x00s"]
    r = api.client.post("/v1/models", json={"name": "nul", "rule_list": doc}, headers=api.h())
    assert r.status_code == 201, r.text  # a category may hold a NUL (a feature name may not)
    r = api.client.get(f"/v1/models/{r.json()['id']}/export", params={"format": "sql"}, headers=api.h())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["details"][0]["field"] == "query.format" and "cannot be exported as sql" in err["message"], err
    assert "NUL" in err["message"], err


@pytest.mark.parametrize("version_id", ["", "mv_\u0000x", "x" * 41])
def test_an_alias_version_id_that_cannot_be_an_id_is_a_422_naming_it(sqlite_api, doc, version_id: str) -> None:
    """`{"version_id": ""}` was looked up and answered 404 "model version '' not found"; one holding a NUL was
    a generic 422 naming no field."""
    sqlite_api.import_model(doc)
    r = sqlite_api.client.put(
        "/v1/registered-models/risk/aliases/production", json={"version_id": version_id}, headers=sqlite_api.h()
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "version_id", r.json()
