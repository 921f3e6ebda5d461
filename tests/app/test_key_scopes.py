"""API key scopes: a `predict` key (a backend's) asks for decisions and nothing else; `full` keys are as before."""

from __future__ import annotations

import json

import pytest

from app.services import key_scopes
from app.services.errors import Invalid
from tests.conftest import Api

REC = {"age": 67, "income": 50, "smoker": "yes"}


@pytest.mark.parametrize(
    ("scope", "method", "path", "allowed"),
    [
        ("full", "DELETE", "/v1/datasets/ds_1", True),
        ("predict", "POST", "/v1/models/risk@production/predict", True),
        ("predict", "POST", "/v1/models/mv_123/predict.csv", True),
        ("predict", "POST", "/v1/models/{ref}/predict", True),  # the OpenAPI path template
        ("predict", "post", "/v1/models/risk/predict", True),
        ("predict", "GET", "/v1/models/risk/predict", False),
        ("predict", "GET", "/v1/models/risk@1", False),
        ("predict", "PUT", "/v1/registered-models/risk/aliases/production", False),
        ("predict", "POST", "/v1/models/risk/evaluations", False),
        ("predict", "POST", "/v1/models/a/b/predict", False),
        ("predict", "POST", "/v1/models/risk/predict/extra", False),
        ("predict", "POST", "/x/v1/models/risk/predict", False),
        ("other", "POST", "/v1/models/risk/predict", False),
    ],
)
def test_what_each_scope_allows(scope: str, method: str, path: str, allowed: bool) -> None:
    assert key_scopes.allows(scope, method, path) is allowed


def test_an_unknown_scope_is_refused_naming_the_choices() -> None:
    with pytest.raises(Invalid, match="scope: must be one of full, predict"):
        key_scopes.check_scope("admin")


def test_a_predict_key_decides_and_does_nothing_else(api: Api, doc) -> None:
    """A governance probe: every key could do everything, so the key a backend uses for decisions could also move
    `production`, read the audit trail or delete datasets. A `predict` key decides (audited under its own id) and
    is refused (403 `key_scope`, nothing done) everywhere else."""
    from app.admin import create_key

    v = api.import_model(doc)
    key_id, key = create_key(api.url, "tenant-a", "scoring backend", scope="predict")
    r = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=api.h(key))
    assert r.status_code == 200, r.text
    csv = {"file": ("x.csv", b"age,income,smoker\n67,50,yes\n", "text/csv")}
    assert api.client.post(f"/v1/models/{v['id']}/predict.csv", files=csv, headers=api.h(key)).status_code == 200
    events, datasets = api.count("registry_events"), api.count("datasets")
    refused = [
        ("GET", f"/v1/models/{v['id']}", {}),
        ("GET", "/v1/audit", {}),
        ("GET", "/v1/audit/verify", {}),
        ("GET", "/v1/keys", {}),
        ("PUT", "/v1/registered-models/risk/aliases/production", {"json": {"version": 1}}),
        ("POST", "/v1/datasets", {"files": {"file": ("d.csv", b"a,b\n1,2\n", "text/csv")}}),
        ("POST", "/v1/models", {"json": {"name": "forged", "rule_list": doc}}),
    ]
    for method, path, kwargs in refused:
        r = api.client.request(method, path, headers=api.h(key), **kwargs)
        assert r.status_code == 403, (method, path, r.text)
        err = r.json()["error"]
        assert err["code"] == "key_scope" and "scope 'predict'" in err["message"], err
    assert (api.count("registry_events"), api.count("datasets")) == (events, datasets)
    assert api.client.get("/v1/registered-models/risk", headers=api.h()).json()["aliases"] == {}
    audited = api.client.get("/v1/audit", headers=api.h()).json()["items"]
    assert [a["api_key_id"] for a in audited] == [key_id, key_id]
    keys = {k["id"]: k for k in api.client.get("/v1/keys", headers=api.h()).json()["items"]}
    assert keys[key_id]["scope"] == "predict" and keys[key_id]["label"] == "scoring backend"
    assert {k["scope"] for i, k in keys.items() if i != key_id} == {"full"}


def test_the_contract_documents_403_where_a_predict_key_is_refused(sqlite_api: Api) -> None:
    schema = sqlite_api.client.get("/openapi.json").json()
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or not op.get("security"):
                continue
            documented = "403" in op["responses"]
            assert documented is not key_scopes.allows("predict", method, path), (method, path)


def test_create_key_takes_a_scope_on_the_command_line(tmp_path, monkeypatch, capsys) -> None:
    from worker.cli import main

    for k in list(__import__("os").environ):
        if k.startswith("NEURULES_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NEURULES_DATA_DIR", str(tmp_path / "var"))
    main(["create-tenant", "acme"])
    main(["create-key", "acme", "--label", "backend", "--scope", "predict"])
    main(["create-key", "acme", "--label", "reviewer"])
    capsys.readouterr()
    main(["list-tenants"])
    keys = json.loads(capsys.readouterr().out)[0]["keys"]
    assert [(k["label"], k["scope"]) for k in keys] == [("backend", "predict"), ("reviewer", "full")]
    with pytest.raises(SystemExit) as bad:
        main(["create-key", "acme", "--scope", "admin"])
    assert bad.value.code == 2 and "invalid choice: 'admin'" in capsys.readouterr().err
