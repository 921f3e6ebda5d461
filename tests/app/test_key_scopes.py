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
        ("read", "GET", "/v1/audit", True),
        ("read", "get", "/v1/audit/verify", True),
        ("read", "HEAD", "/v1/models/risk@1", True),
        ("read", "POST", "/v1/models/risk/predict", False),
        ("read", "POST", "/v1/models/risk/predict.csv", False),
        ("read", "PUT", "/v1/registered-models/risk/aliases/production", False),
        ("read", "DELETE", "/v1/datasets/ds_1", False),
        ("read", "POST", "/v1/models/risk/evaluations", False),
        ("read", "PATCH", "/v1/datasets/ds_1", False),
    ],
)
def test_what_each_scope_allows(scope: str, method: str, path: str, allowed: bool) -> None:
    assert key_scopes.allows(scope, method, path) is allowed


def test_an_unknown_scope_is_refused_naming_the_choices() -> None:
    with pytest.raises(Invalid, match="scope: must be one of full, predict, read"):
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


def test_a_read_key_reads_and_changes_nothing(api: Api, doc) -> None:
    """A reviewer, auditor or regulator needs to see versions, evaluations and the audit trail and check the chain,
    and nothing more: a `read` key answers every GET and HEAD, and is refused (403 `key_scope`, nothing done)
    wherever data would change or a decision be made (a decision writes an audit row)."""
    from app.admin import create_key

    v = api.import_model(doc)
    api.client.put("/v1/registered-models/risk/aliases/production", json={"version": 1}, headers=api.h())
    assert api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=api.h()).status_code == 200
    key_id, key = create_key(api.url, "tenant-a", "regulator", scope="read")
    for path in (
        f"/v1/models/{v['id']}",
        "/v1/models",
        "/v1/registered-models/risk",
        "/v1/registered-models/risk/events",
        "/v1/audit",
        "/v1/audit/verify",
        "/v1/keys",
        "/v1/datasets",
        "/v1/jobs",
    ):
        r = api.client.get(path, headers=api.h(key))
        assert r.status_code == 200, (path, r.text)
        assert api.client.head(path, headers=api.h(key)).status_code == 200, path
    (decision,) = api.client.get("/v1/audit", headers=api.h(key)).json()["items"]
    assert decision["rule_id"] == 1 and api.client.get("/v1/audit/verify", headers=api.h(key)).json()["intact"]
    counts = {t: api.count(t) for t in ("audit_log", "registry_events", "datasets", "model_versions", "evaluations")}
    csv = {"file": ("x.csv", b"age,income,smoker\n67,50,yes\n", "text/csv")}
    refused = [
        ("POST", f"/v1/models/{v['id']}/predict", {"json": {"records": [REC]}}),
        ("POST", f"/v1/models/{v['id']}/predict.csv", {"files": csv}),
        ("PUT", "/v1/registered-models/risk/aliases/production", {"json": {"version": 1}}),
        ("DELETE", "/v1/registered-models/risk/aliases/production", {}),
        ("POST", "/v1/datasets", {"files": {"file": ("d.csv", b"a,b\n1,2\n", "text/csv")}}),
        ("POST", "/v1/models", {"json": {"name": "forged", "rule_list": doc}}),
        ("POST", "/v1/jobs", {"json": {"dataset_id": "ds_x", "target": "y"}}),
    ]
    for method, path, kwargs in refused:
        r = api.client.request(method, path, headers=api.h(key), **kwargs)
        assert r.status_code == 403, (method, path, r.text)
        err = r.json()["error"]
        assert err["code"] == "key_scope" and "scope 'read'" in err["message"] and "GET" in err["message"], err
    assert {t: api.count(t) for t in counts} == counts
    assert api.client.get("/v1/registered-models/risk", headers=api.h()).json()["aliases"] == {"production": v["id"]}
    keys = {k["id"]: k for k in api.client.get("/v1/keys", headers=api.h()).json()["items"]}
    assert keys[key_id]["scope"] == "read" and keys[key_id]["label"] == "regulator"


def test_the_contract_documents_403_where_some_key_is_refused(sqlite_api: Api) -> None:
    schema = sqlite_api.client.get("/openapi.json").json()
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if not isinstance(op, dict) or not op.get("security"):
                continue
            documented = "403" in op["responses"]
            refused = not all(key_scopes.allows(s, method, path) for s in key_scopes.SCOPES)
            assert documented is refused, (method, path)


def test_create_key_takes_a_scope_on_the_command_line(tmp_path, monkeypatch, capsys) -> None:
    from worker.cli import main

    for k in list(__import__("os").environ):
        if k.startswith("NEURULES_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("NEURULES_DATA_DIR", str(tmp_path / "var"))
    main(["create-tenant", "acme"])
    main(["create-key", "acme", "--label", "backend", "--scope", "predict"])
    main(["create-key", "acme", "--label", "reviewer"])
    main(["create-key", "acme", "--label", "auditor", "--scope", "read"])
    capsys.readouterr()
    main(["list-tenants"])
    keys = json.loads(capsys.readouterr().out)[0]["keys"]
    assert [(k["label"], k["scope"]) for k in keys] == [
        ("backend", "predict"),
        ("reviewer", "full"),
        ("auditor", "read"),
    ]
    with pytest.raises(SystemExit) as bad:
        main(["create-key", "acme", "--scope", "admin"])
    assert bad.value.code == 2 and "invalid choice: 'admin'" in capsys.readouterr().err


def test_behind_a_root_path_the_predict_key_still_decides(sqlite_api: Api, doc) -> None:
    """A reviewer: uvicorn `--root-path /nr` puts the mount in front of the path the check read, while routing
    strips it, so a predict key was refused its own predictions there (403). The check reads the routed path."""
    import asyncio

    from app.admin import create_key
    from tests.conftest import http_scope

    v = sqlite_api.import_model(doc)
    _, key = create_key(sqlite_api.url, "tenant-a", "backend", scope="predict")
    body = json.dumps({"records": [REC]}).encode()

    async def call(method: str, path: str) -> int:
        headers = [(b"x-api-key", key.encode()), (b"content-type", b"application/json")]
        scope = {**http_scope(method, f"/nr{path}", headers), "root_path": "/nr"}
        sent: list[dict[str, object]] = []
        chunks = [{"type": "http.request", "body": body, "more_body": False}]

        async def receive() -> dict[str, object]:
            return chunks.pop(0) if chunks else {"type": "http.disconnect"}

        async def send(message: dict[str, object]) -> None:
            sent.append(message)

        await sqlite_api.app(scope, receive, send)
        return int(next(m["status"] for m in sent if m["type"] == "http.response.start"))  # type: ignore[call-overload]

    assert asyncio.run(call("POST", f"/v1/models/{v['id']}/predict")) == 200
    assert asyncio.run(call("GET", f"/v1/models/{v['id']}")) == 403


def test_a_restricted_key_is_unknown_to_a_release_without_scopes(api: Api, doc) -> None:
    """A reviewer: a release before scopes (run on this database after a rollback, or in a rolling upgrade) would
    take a predict key for a key that may do everything. It looks keys up by their prefix alone, and a restricted
    key's stored prefix is marked, so it finds none (a 401 there); a marked row that lost its scope to a downgrade
    and came back `full` stays a predict key here."""
    from sqlalchemy import text

    from app.admin import create_key
    from app.services import keys

    key_id, key = create_key(api.url, "tenant-a", "backend", scope="predict")
    plain = keys.split_prefix(key)
    with api.app.state.service.db.engine.begin() as c:
        assert c.execute(text("SELECT count(*) FROM api_keys WHERE prefix = :p"), {"p": plain}).scalar_one() == 0
        c.execute(text("UPDATE api_keys SET scope = 'full' WHERE id = :i"), {"i": key_id})  # as after 0007's round trip
    v = api.import_model(doc)
    decided = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=api.h(key))
    assert decided.status_code == 200, decided.text
    r = api.client.get("/v1/datasets", headers=api.h(key))
    assert r.status_code == 403 and r.json()["error"]["code"] == "key_scope"


def test_a_read_key_is_unknown_to_a_release_without_scopes_and_stays_read_only(api: Api, doc) -> None:
    """A read key is stored marked too (its own mark): a release before scopes finds no such key, and a row whose
    scope came back `full` after a downgrade stays a read key here (never one that may decide or change data)."""
    from sqlalchemy import text

    from app.admin import create_key
    from app.services import keys

    key_id, key = create_key(api.url, "tenant-a", "auditor", scope="read")
    plain = keys.split_prefix(key)
    with api.app.state.service.db.engine.begin() as c:
        assert c.execute(text("SELECT count(*) FROM api_keys WHERE prefix = :p"), {"p": plain}).scalar_one() == 0
        c.execute(text("UPDATE api_keys SET scope = 'full' WHERE id = :i"), {"i": key_id})
    v = api.import_model(doc)
    assert api.client.get(f"/v1/models/{v['id']}", headers=api.h(key)).status_code == 200
    r = api.client.post(f"/v1/models/{v['id']}/predict", json={"records": [REC]}, headers=api.h(key))
    assert r.status_code == 403 and "scope 'read'" in r.json()["error"]["message"]
