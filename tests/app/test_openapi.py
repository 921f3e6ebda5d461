"""The OpenAPI document is fit for generated clients: short stable operation ids by one rule, one `$ref`'d
error schema, every status the layers below the routers can answer documented, typed parameters."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.testclient import TestClient

from app.openapi import complete_openapi, operation_id
from app.schemas.errors import Error

EXPECTED_IDS = {
    ("post", "/v1/datasets"): "datasets_create",
    ("get", "/v1/datasets"): "datasets_list",
    ("get", "/v1/datasets/{dataset_id}"): "datasets_get",
    ("delete", "/v1/datasets/{dataset_id}"): "datasets_delete",
    ("post", "/v1/jobs"): "jobs_create",
    ("get", "/v1/jobs"): "jobs_list",
    ("get", "/v1/jobs/{job_id}"): "jobs_get",
    ("post", "/v1/jobs/{job_id}/cancel"): "jobs_cancel",
    ("post", "/v1/models"): "models_create",
    ("get", "/v1/models"): "models_list",
    ("get", "/v1/models/{ref}"): "models_get",
    ("get", "/v1/models/{ref}/export"): "models_export",
    ("post", "/v1/models/{ref}/predict"): "models_predict",
    ("post", "/v1/models/{ref}/predict.csv"): "models_predict_csv",
    ("get", "/v1/registered-models"): "registered_models_list",
    ("get", "/v1/registered-models/{name}"): "registered_models_get",
    ("put", "/v1/registered-models/{name}/aliases/{alias}"): "registered_models_aliases_update",
    ("delete", "/v1/registered-models/{name}/aliases/{alias}"): "registered_models_aliases_delete",
    ("post", "/v1/registered-models/{name}/versions/{version}/reviews"): "registered_models_versions_reviews",
    ("get", "/v1/audit"): "audit_list",
    ("post", "/v1/models/{ref}/evaluations"): "models_evaluations_create",
    ("get", "/v1/models/{ref}/evaluations"): "models_evaluations_list",
    ("get", "/v1/evaluations/{evaluation_id}"): "evaluations_get",
    ("get", "/v1/models/{ref}/compare"): "models_compare",
    ("get", "/v1/models/{ref}/monitoring"): "models_monitoring",
    ("get", "/v1/jobs/{job_id}/history"): "jobs_history",
    ("get", "/v1/registered-models/{name}/events"): "registered_models_events",
    ("get", "/v1/datasets/{dataset_id}/preview"): "datasets_preview",
    ("get", "/healthz"): "ops_healthz",
    ("get", "/readyz"): "ops_readyz",
    ("get", "/metrics"): "ops_metrics",
}


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    from app.main import create_app
    from app.settings import Settings
    from tests.conftest import FakeQueue

    app = create_app(Settings(database_url="sqlite://"), queue=FakeQueue(), configure_logs=False)
    return json.loads(json.dumps(app.openapi()))


def _ops(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, op) for p, item in spec["paths"].items() for m, op in item.items()]


def test_operation_ids_are_short_stable_and_unique(spec) -> None:
    ids = {(m, p): op["operationId"] for m, p, op in _ops(spec)}
    for key, expected in EXPECTED_IDS.items():
        assert ids[key] == expected, key
    assert len(set(ids.values())) == len(ids)


def test_routes_added_later_get_ids_by_the_same_rule() -> None:
    router = APIRouter(prefix="/v2/evaluation-runs", tags=["evaluations"])

    @router.get("/{run_id}/per-rule.csv")
    def a() -> None: ...

    @router.patch("/{run_id}")
    def b() -> None: ...

    @router.put("/{run_id}/labels/{label}")
    def c() -> None: ...

    @router.delete("/{run_id}/cache")
    def d() -> None: ...

    app = FastAPI(generate_unique_id_function=operation_id)
    app.include_router(router)
    got = {op["operationId"] for _, _, op in _ops(app.openapi())}
    assert got == {
        "evaluation_runs_per_rule_csv",
        "evaluation_runs_patch",
        "evaluation_runs_labels_update",
        "evaluation_runs_cache_delete",
    }


@pytest.mark.filterwarnings("ignore:Duplicate Operation ID")
def test_a_clash_is_refused_not_silently_renamed() -> None:
    router = APIRouter(prefix="/v1/things")

    @router.get("/{thing_id}/runs")
    def list_runs() -> None: ...

    @router.post("/{thing_id}/runs")
    def start_run() -> None: ...

    app = FastAPI(generate_unique_id_function=operation_id)
    app.include_router(router)
    with pytest.raises(RuntimeError, match="things_runs"):
        complete_openapi(app.openapi())


def test_every_error_response_refers_to_the_one_error_schema(spec) -> None:
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    assert set(spec["components"]["schemas"]["Error"]["properties"]) == {"error"}
    n = 0
    for m, p, op in _ops(spec):
        for code, response in op["responses"].items():
            if int(code) < 400 or (p == "/readyz" and code == "503"):
                continue
            assert response["content"] == {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}, (
                m,
                p,
                code,
            )
            n += 1
    assert n > 80
    assert "Error" not in json.dumps(spec["paths"]).replace("#/components/schemas/Error", "")


def test_statuses_the_lower_layers_answer_are_documented(spec) -> None:
    for m, p, op in _ops(spec):
        codes = set(op["responses"])
        if op.get("security"):
            assert {"401", "503"} <= codes, (m, p)
        if op.get("parameters") or op.get("requestBody"):
            assert "422" in codes, (m, p)
        if op.get("requestBody"):
            assert "413" in codes, (m, p)
            if "multipart/form-data" in op["requestBody"]["content"]:
                assert {"400", "415"} <= codes, (m, p)
        else:
            assert "400" not in codes, (m, p)


def test_every_422_for_an_unknown_parameter_is_documented(sqlite_api) -> None:
    """Every operation refusing an unknown query parameter (422 `query.<name>`) documents 422; GET /v1/keys and
    GET /v1/audit/verify, which take no parameters, answered it undocumented."""
    import re

    spec = sqlite_api.client.get("/openapi.json").json()
    seen = 0
    for path, item in spec["paths"].items():
        for method, op in item.items():
            url = re.sub(r"\{[^}]+\}", "x", path) + "?zz_unknown=1"
            r = sqlite_api.client.request(method.upper(), url, headers=sqlite_api.h())
            if r.status_code == 422 and "query.zz_unknown" in r.text:
                seen += 1
                assert "422" in op["responses"], (method, path)
    assert seen > 25


def test_training_parameters_are_typed(spec) -> None:
    schemas = spec["components"]["schemas"]
    job = schemas["JobCreate"]["properties"]["parameters"]
    assert "TrainingParameters" in json.dumps(job)
    options = schemas["TrainingOptions"]["properties"]
    assert options["lr"]["anyOf"][0]["type"] == "number" and "learning rate" in options["lr"]["description"]
    assert options["max_conditions"]["anyOf"][0]["type"] == "integer"
    assert "conditions" in options["max_conditions"]["description"]
    assert all(o.get("description") for o in options.values())


def test_reviews_and_the_approval_are_documented(spec) -> None:
    """The review operation documents its refusals (403 `self_review`, 409 `evaluation_required`) and the version
    answer its approval state; the alias move its 409 (`version_not_approved`)."""
    op = spec["paths"]["/v1/registered-models/{name}/versions/{version}/reviews"]["post"]
    assert {"201", "403", "404", "409", "422"} <= set(op["responses"]) and "self_review" in op["responses"]["403"][
        "description"
    ]
    schemas = spec["components"]["schemas"]
    assert set(schemas["ReviewCreate"]["required"]) == {"decision", "note"}
    assert schemas["ReviewCreate"]["properties"]["note"]["maxLength"] == 2000
    assert "approval" in schemas["ModelVersionPublic"]["required"]
    assert set(schemas["ApprovalPublic"]["properties"]["state"]["enum"]) == {"approved", "rejected", "pending"}
    put = spec["paths"]["/v1/registered-models/{name}/aliases/{alias}"]["put"]
    assert "version_not_approved" in put["summary"]


def test_error_bodies_match_the_error_schema(sqlite_api) -> None:
    c = TestClient(sqlite_api.app, raise_server_exceptions=False)
    answers = [
        c.get("/v1/datasets"),  # 401
        c.get("/v1/jobs/job_nope", headers=sqlite_api.h()),  # 404
        c.post("/v1/jobs", json={"dataset_id": 1}, headers=sqlite_api.h()),  # 422
        c.post("/v1/datasets", content=b"x", headers={**sqlite_api.h(), "content-type": "text/plain"}),  # 415
        c.options("/v1/jobs"),  # 405
    ]
    assert [r.status_code for r in answers] == [401, 404, 422, 415, 405]
    for r in answers:
        Error.model_validate(r.json())
