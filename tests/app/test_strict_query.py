"""A query parameter an operation does not take is a 422 naming it (`app.http.strict_query`), never ignored."""

from __future__ import annotations

from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from app.http.strict_query import StrictQueryRoute, query_names
from app.main import ROUTERS


def _client(api) -> TestClient:
    return TestClient(api.app, raise_server_exceptions=False)


def test_a_misspelt_audit_filter_is_refused_not_ignored(sqlite_api, doc) -> None:
    """`model_name` is no filter of the audit log: answering every record would read as filtered."""
    v = sqlite_api.import_model(doc)["id"]
    rec = {"age": 50, "income": 1, "smoker": "yes"}
    assert sqlite_api.client.post(f"/v1/models/{v}/predict", json={"records": [rec]}, headers=sqlite_api.h()).is_success
    r = _client(sqlite_api).get("/v1/audit", params={"model_name": "m", "limit": 5}, headers=sqlite_api.h())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_input"
    assert err["details"] == [
        {"field": "query.model_name", "message": err["details"][0]["message"]},
    ]
    assert "unknown query parameter" in err["details"][0]["message"]
    assert "model_version_id" in err["details"][0]["message"]  # what it takes instead
    ok = _client(sqlite_api).get("/v1/audit", params={"model_version_id": v, "limit": 5}, headers=sqlite_api.h())
    assert ok.status_code == 200 and len(ok.json()["items"]) == 1, ok.text


def test_every_unknown_name_is_named_once(sqlite_api) -> None:
    r = _client(sqlite_api).get("/v1/jobs?state=queued&x=1&x=2&y=", headers=sqlite_api.h())
    assert r.status_code == 422, r.text
    assert [d["field"] for d in r.json()["error"]["details"]] == ["query.x", "query.y"]


def test_the_lean_predict_route_checks_its_query_too(sqlite_api, doc) -> None:
    """The predict route skips FastAPI's solver: the same 422, and no audit row for the refused request."""
    v = sqlite_api.import_model(doc)["id"]
    rec = {"age": 50, "income": 1, "smoker": "yes"}
    before = sqlite_api.count("audit_log")
    r = _client(sqlite_api).post(
        f"/v1/models/{v}/predict", params={"explian": "false"}, json={"records": [rec]}, headers=sqlite_api.h()
    )
    assert r.status_code == 422, r.text
    assert r.json()["error"]["details"][0]["field"] == "query.explian"
    assert sqlite_api.count("audit_log") == before
    ok = _client(sqlite_api).post(
        f"/v1/models/{v}/predict", params={"explain": "false"}, json={"records": [rec]}, headers=sqlite_api.h()
    )
    assert ok.status_code == 200, ok.text


def test_every_api_route_checks_and_takes_what_its_openapi_declares(sqlite_api) -> None:
    """Each /v1 and ops operation is strict, and accepts exactly the query parameters its documentation lists."""
    paths = sqlite_api.app.openapi()["paths"]
    checked = 0
    for route in (r for router in ROUTERS for r in router.routes):
        assert isinstance(route, APIRoute) and route.include_in_schema, route
        assert isinstance(route, StrictQueryRoute), route.path
        for method in route.methods - {"HEAD"}:
            op = paths[route.path_format][method.lower()]
            documented = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
            assert query_names(route.dependant) == documented, (method, route.path)
            checked += 1
    assert checked > 30
