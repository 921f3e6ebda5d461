"""A query parameter an operation does not take is a 422 naming it (`app.http.strict_query`), never ignored."""

from __future__ import annotations

import pytest
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


@pytest.mark.parametrize("value", ["risk@1", "mv_0000", "risk"])
def test_an_audit_filter_naming_no_version_is_a_404_not_an_empty_page(sqlite_api, doc, value: str) -> None:
    """An auditor filtered by `clinic@1` (a reference, not a version id) and got 200 with no record, though the
    version had made 1,601 decisions: the empty page read as "never used"."""
    v = sqlite_api.import_model(doc)["id"]
    rec = {"age": 50, "income": 1, "smoker": "yes"}
    assert sqlite_api.client.post(f"/v1/models/{v}/predict", json={"records": [rec]}, headers=sqlite_api.h()).is_success
    r = _client(sqlite_api).get("/v1/audit", params={"model_version_id": value}, headers=sqlite_api.h())
    assert r.status_code == 404, r.text
    err = r.json()["error"]
    assert err["code"] == "not_found" and "mv_" in err["message"], err
    assert err["details"][0]["field"] == "query.model_version_id"
    other = _client(sqlite_api).get("/v1/audit", params={"model_version_id": v}, headers=sqlite_api.h(sqlite_api.key_b))
    assert other.status_code == 404, other.text  # another tenant's version is none of this tenant's


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


def test_without_a_valid_key_it_is_a_401_first(sqlite_api, doc) -> None:
    """The 422 lists what an operation takes: a caller without a valid key gets the 401 it would get anyway."""
    v = sqlite_api.import_model(doc)["id"]
    client = _client(sqlite_api)
    for headers in ({}, {"X-API-Key": "nr_not_a_key"}):
        for r in (
            client.get("/v1/jobs?foo=1", headers=headers),
            client.post(f"/v1/models/{v}/predict?foo=1", json={"records": [{}]}, headers=headers),
        ):
            assert r.status_code == 401, r.text


def test_probes_may_add_query_parameters(sqlite_api) -> None:
    """Health, readiness and metrics stay lenient: uptime checkers add cache busters, scrapers `params:`."""
    client = _client(sqlite_api)
    assert client.get("/healthz?probe=1").status_code == 200
    assert client.get("/metrics?format=prometheus").status_code == 200


def test_every_api_route_checks_and_takes_what_its_openapi_declares(sqlite_api) -> None:
    """Each /v1 operation is strict, and accepts exactly the query parameters its documentation lists."""
    paths = sqlite_api.app.openapi()["paths"]
    checked = 0
    for route in (r for router in ROUTERS for r in router.routes):
        assert isinstance(route, APIRoute) and route.include_in_schema, route
        assert isinstance(route, StrictQueryRoute) == route.path.startswith("/v1/"), route.path
        for method in route.methods - {"HEAD"}:
            op = paths[route.path_format][method.lower()]
            documented = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
            assert query_names(route.dependant) == documented, (method, route.path)
            checked += 1
    assert checked > 30


def test_a_query_parameter_given_twice_is_refused_not_cut_to_the_last(sqlite_api, doc) -> None:
    """FastAPI kept the last value: `?state=queued&state=running` listed running jobs only (a queued one was
    left out with no word), `?limit=600&limit=5` passed although 600 is over the bound, and the predict
    route's `explain` took the last of two."""
    client, h = _client(sqlite_api), sqlite_api.h()
    v = sqlite_api.import_model(doc)["id"]
    rec = {"age": 50, "income": 1, "smoker": "yes"}
    before = sqlite_api.count("audit_log")
    for r in (
        client.get("/v1/jobs?state=queued&state=running", headers=h),
        client.get("/v1/jobs?limit=600&limit=5", headers=h),
        client.post(f"/v1/models/{v}/predict?explain=false&explain=true", json={"records": [rec]}, headers=h),
    ):
        assert r.status_code == 422, r.text
        (detail,) = r.json()["error"]["details"]
        assert detail["field"] in ("query.state", "query.limit", "query.explain"), detail
        assert detail["message"].startswith("given 2 times"), detail
    assert sqlite_api.count("audit_log") == before
    assert client.get("/healthz?probe=1&probe=2").status_code == 200  # the ops routes stay lenient


def test_an_empty_filter_is_refused_not_taken_as_no_filter(sqlite_api) -> None:
    """`?model_name=` (a client's template with an empty value) listed every job as if unfiltered, while
    `/v1/audit?model_version_id=` applied it and listed none: each empty filter is now a 422 naming it."""
    client, h = _client(sqlite_api), sqlite_api.h()
    for path, field in [
        ("/v1/jobs?model_name=", "query.model_name"),
        ("/v1/jobs?dataset_id=", "query.dataset_id"),
        ("/v1/models?name=", "query.name"),
        ("/v1/audit?model_version_id=", "query.model_version_id"),
        ("/v1/audit?input_digest=", "query.input_digest"),
    ]:
        r = client.get(path, headers=h)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["details"][0]["field"] == field, r.text
