"""API keys (missing, wrong, revoked), health/readiness, metrics, JSON logs, OpenAPI."""

from __future__ import annotations

import json
import logging

import pytest

from tests.conftest import http_scope


@pytest.mark.parametrize("path", ["/v1/datasets", "/v1/jobs", "/v1/models", "/v1/registered-models"])
def test_no_key_is_401(sqlite_api, path: str) -> None:
    r = sqlite_api.client.get(path)
    assert r.status_code == 401 and r.json()["error"]["code"] == "missing_api_key"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("key", ["nope", "nrk_000000000000_abc", "Bearer x"])
def test_wrong_key_is_401(sqlite_api, key: str) -> None:
    r = sqlite_api.client.get("/v1/datasets", headers={"X-API-Key": key})
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"


def test_bearer_and_wrong_secret(sqlite_api) -> None:
    assert (
        sqlite_api.client.get("/v1/datasets", headers={"Authorization": f"Bearer {sqlite_api.key_a}"}).status_code
        == 200
    )
    forged = sqlite_api.key_a[:-4] + "AAAA"
    assert sqlite_api.client.get("/v1/datasets", headers={"X-API-Key": forged}).status_code == 401


def test_x_api_key_comes_before_a_bearer_token(sqlite_api) -> None:
    """A proxy in front may set its own `Authorization: Bearer`: a request with X-API-Key is the key's request."""
    a, b = sqlite_api.key_a, sqlite_api.key_b
    up = sqlite_api.client.post(
        "/v1/datasets", files={"file": ("a.csv", b"x,t\n1,0\n2,1\n", "text/csv")}, headers={"X-API-Key": a}
    )
    assert up.status_code == 201, up.text  # tenant a's: the answer tells which tenant acted
    both = {"X-API-Key": a, "Authorization": f"Bearer {b}"}
    listed = sqlite_api.client.get("/v1/datasets", headers=both).json()
    assert [d["id"] for d in listed["items"]] == [up.json()["id"]]
    proxy = sqlite_api.client.get("/v1/datasets", headers={"X-API-Key": a, "Authorization": "Bearer eyJ.not.ours"})
    assert proxy.status_code == 200


def test_revoked_key(sqlite_api) -> None:
    from app.admin import create_key, list_tenants, revoke_key

    key_id, key = create_key(sqlite_api.url, "tenant-a", "temp")
    assert sqlite_api.client.get("/v1/datasets", headers={"X-API-Key": key}).status_code == 200
    revoke_key(sqlite_api.url, key_id)
    assert sqlite_api.client.get("/v1/datasets", headers={"X-API-Key": key}).status_code == 401
    listed = {t["name"]: t for t in list_tenants(sqlite_api.url)}
    assert any(k["revoked"] for k in listed["tenant-a"]["keys"])
    assert key not in json.dumps(listed)


def test_keys_are_stored_hashed(sqlite_api) -> None:
    from sqlalchemy import text

    with sqlite_api.app.state.service.db.engine.connect() as c:
        stored = [r[0] + r[1] for r in c.execute(text("SELECT prefix, key_hash FROM api_keys"))]
    assert all(sqlite_api.key_a not in s and sqlite_api.key_a.split("_", 2)[2] not in s for s in stored)


def test_health_ready_metrics(sqlite_api, doc) -> None:
    c = sqlite_api.client
    assert c.get("/healthz").json() == {"status": "ok"}
    r = c.get("/readyz")
    assert r.status_code == 200 and r.json()["checks"]["database"] == "ok"
    v = sqlite_api.import_model(doc)
    c.post(
        f"/v1/models/{v['id']}/predict",
        json={"records": [{"age": 1, "income": 2, "smoker": "no"}]},
        headers=sqlite_api.h(),
    )
    text = c.get("/metrics").text
    assert "neurules_http_request_duration_seconds_bucket" in text
    assert 'route="/v1/models/{ref}/predict"' in text
    assert 'neurules_predictions_total{endpoint="json"} 1.0' in text
    assert 'neurules_jobs{state="queued"} 0.0' in text
    assert "neurules_jobs_ok 1.0" in text


def test_metrics_behind_a_token_when_one_is_set(tmp_path) -> None:
    """/metrics labels name every tenant's models and count their decisions per rule, and it answered anyone: with
    NEURULES_METRICS_TOKEN set it answers only that bearer token (any case of `Bearer`); an API key is not it."""
    from tests.conftest import make_api

    token = "scrape-" + "s3cret" * 3
    gen = make_api(tmp_path, "sqlite", metrics_token=token)
    api = next(gen)
    try:
        c = api.client
        # the header was a parameter, which documented a 422 no request can get
        assert sorted(c.get("/openapi.json").json()["paths"]["/metrics"]["get"]["responses"]) == ["200", "401"]
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token-of-length"},
            {"Authorization": token},
            {"Authorization": f"Basic {token}"},
            {"X-API-Key": api.key_a},
            {"Authorization": f"Bearer {token}x"},
        ):
            r = c.get("/metrics", headers=headers)
            assert r.status_code == 401 and r.json()["error"]["code"] == "metrics_token", (headers, r.text)
            assert r.headers["www-authenticate"] == "Bearer" and "neurules_" not in r.text
        assert c.head("/metrics").status_code == 401
        for auth in (f"Bearer {token}", f"bearer {token}", f"  Bearer   {token} "):
            r = c.get("/metrics", headers={"Authorization": auth})
            assert r.status_code == 200 and "neurules_http_request_duration_seconds" in r.text, auth
        assert c.get("/healthz").status_code == 200 and c.get("/readyz").status_code == 200  # probes stay open
    finally:
        gen.close()


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("short-token", "at least 16 characters"),
        ("a token with blanks", "blanks"),
        ("tab\there-is-a-token", "blanks"),
        ("s\u00e9same-token-0123456789", "printable ASCII"),  # could never match: headers are read as latin-1
    ],
)
def test_a_weak_or_blank_holding_metrics_token_fails_fast(value: str, problem: str) -> None:
    from pydantic import ValidationError

    from app.settings import Settings

    with pytest.raises(ValidationError, match=problem) as refused:
        Settings(metrics_token=value)
    assert value not in str(refused.value)  # a secret refused is not echoed into a log
    assert Settings(metrics_token="").metrics_token is None  # compose passes `${NEURULES_METRICS_TOKEN:-}`
    assert Settings(metrics_token="   ").metrics_token is None


def test_readyz_reports_broker_down(sqlite_api) -> None:
    def down() -> None:
        raise ConnectionError("no broker")

    sqlite_api.app.state.service.broker_check = down
    r = sqlite_api.client.get("/readyz")
    assert r.status_code == 503 and r.json()["checks"]["broker"].startswith("error")


def test_unknown_route_and_method_use_error_shape(sqlite_api) -> None:
    r = sqlite_api.client.get("/v2/nothing")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = sqlite_api.client.delete("/healthz")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"


def test_json_log_lines() -> None:
    from app.observability import JsonFormatter

    rec = logging.LogRecord("neurules.test", logging.INFO, __file__, 1, "hello %s", ("x",), None)
    rec.job_id = "job_1"
    line = json.loads(JsonFormatter().format(rec))
    assert line["message"] == "hello x" and line["job_id"] == "job_1" and line["level"] == "INFO"


def test_openapi_documents_everything(sqlite_api) -> None:
    spec = sqlite_api.client.get("/openapi.json").json()
    paths = spec["paths"]
    for p in (
        "/v1/datasets",
        "/v1/jobs",
        "/v1/jobs/{job_id}/cancel",
        "/v1/models/{ref}/predict",
        "/v1/models/{ref}/predict.csv",
        "/v1/registered-models/{name}/aliases/{alias}",
        "/readyz",
        "/metrics",
    ):
        assert p in paths, p
    assert "multipart/form-data" in paths["/v1/datasets"]["post"]["requestBody"]["content"]
    assert "422" in paths["/v1/models/{ref}/predict"]["post"]["responses"]
    schemas = spec["components"]["schemas"]
    assert schemas["PredictionList"].get("examples") and schemas["JobCreate"].get("examples")
    for name in (
        "DatasetPublic",
        "JobCreate",
        "JobPublic",
        "ModelCreate",
        "ModelVersionPublic",
        "RegisteredModelPublic",
        "AliasUpdate",
        "AliasPublic",
        "PredictionCreate",
        "PredictionList",
        "AuditPublic",
    ):
        assert schemas[name].get("examples"), name
    export = paths["/v1/models/{ref}/export"]["get"]["responses"]["200"]["content"]
    assert any(c.get("example") for c in export.values())
    assert "Bearer" in spec["components"]["securitySchemes"]["APIKeyHeader"]["description"]


def test_readyz_reports_dead_embedded_worker(sqlite_api) -> None:
    def dead() -> None:
        raise RuntimeError("the embedded training worker thread has stopped")

    sqlite_api.app.state.service.worker_check = dead
    r = sqlite_api.client.get("/readyz")
    assert r.status_code == 503 and "stopped" in r.json()["checks"]["embedded_worker"]


def test_the_request_id_is_echoed_as_sent(sqlite_api) -> None:
    """A request id with bytes outside ASCII came back re-encoded (b'\\xc3\\xa9' as b'\\xc3\\x83\\xc2\\xa9'),
    so a client could not find its request by it; it is echoed byte for byte (cut to 100 characters)."""
    import anyio

    async def echoed(sent: bytes) -> list[bytes]:
        scope = http_scope("GET", "/healthz", [(b"x-request-id", sent)])
        started: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            if message["type"] == "http.response.start":
                started.append(message)

        await sqlite_api.app(scope, receive, send)
        assert started[0]["status"] == 200
        return [v for k, v in started[0]["headers"] if k == b"x-request-id"]

    for sent in (b"req-1", "caf\u00e9".encode(), b"\xff\xfe-x", b"r" * 150):
        assert anyio.run(echoed, sent) == [sent[:100]], sent


def test_the_tenant_sees_its_keys_labels_never_the_keys(sqlite_api) -> None:
    """Events, jobs and audit records name an `api_key_id`, but no endpoint said whose key that is (the label
    given at `create-key`): a reviewer could not tell who acted. GET /v1/keys lists the tenant's keys."""
    from app.admin import create_key, revoke_key

    key_id, key = create_key(sqlite_api.url, "tenant-a", "dr. jones (cardiology)")
    revoke_key(sqlite_api.url, key_id)
    r = sqlite_api.client.get("/v1/keys", headers=sqlite_api.h())
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    by_id = {k["id"]: k for k in items}
    assert by_id[key_id]["label"] == "dr. jones (cardiology)" and by_id[key_id]["revoked_at"] is not None
    assert [k["current"] for k in items].count(True) == 1
    assert key not in r.text and sqlite_api.key_a not in r.text and "hash" not in r.text
    other = sqlite_api.client.get("/v1/keys", headers=sqlite_api.h(sqlite_api.key_b)).json()["items"]
    assert key_id not in {k["id"] for k in other} and len(other) >= 1
    assert sqlite_api.client.get("/v1/keys").status_code == 401
