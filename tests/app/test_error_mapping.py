"""Domain errors become HTTP at one edge (app/errors.py): each kind -> its status, one error shape."""

from __future__ import annotations

import inspect

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.errors import STATUS_OF, install_error_handlers, status_of
from app.services import errors
from app.services.csvdata import CSVError, CSVTooManyRows
from app.services.serving import RecordError
from tests.conftest import http_scope

CASES = [
    (errors.NotFound("dataset 'x' not found"), 404, "not_found"),
    (errors.Invalid.field("parameters.n_rules", "at most 50"), 422, "invalid_input"),
    (errors.Conflict("job j already succeeded", code="job_finished"), 409, "job_finished"),
    (errors.TooLarge("file is over the upload limit"), 413, "payload_too_large"),
    (errors.Unsupported("file: content type 'image/png' is not a CSV"), 415, "unsupported_media_type"),
    (errors.Malformed("malformed multipart body", code="malformed_multipart"), 400, "malformed_multipart"),
    (errors.Unauthenticated("invalid or revoked API key", code="invalid_api_key"), 401, "invalid_api_key"),
    (errors.Unavailable("the job broker is unreachable", dependency="broker"), 503, "broker_unavailable"),
    (CSVError("csv_ragged_rows", "line 3: 2 fields, the header has 3"), 422, "csv_ragged_rows"),
    (CSVTooManyRows("csv_too_many_rows", "the file has more than 10 data rows"), 413, "csv_too_many_rows"),
    (RecordError([{"field": "records[0].age", "message": "missing"}]), 422, "invalid_record"),
    (errors.DomainError("something else"), 400, "error"),
]


def _client(exc: errors.DomainError) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/boom")
    def boom() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(("exc", "status", "code"), CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_each_kind_maps_to_its_status_and_the_error_shape(exc: errors.DomainError, status: int, code: str) -> None:
    r = _client(exc).get("/boom")
    assert r.status_code == status, r.text
    assert r.json() == {"error": {"code": code, "message": exc.message, "details": exc.details}}
    assert ("www-authenticate" in r.headers) == (status == 401)


def test_field_errors_name_the_field() -> None:
    body = _client(errors.Invalid.field("target", "column 'y' is not in dataset d")).get("/boom").json()["error"]
    assert body["message"] == "target: column 'y' is not in dataset d"
    assert body["details"] == [{"field": "target", "message": "column 'y' is not in dataset d"}]


def test_every_kind_has_a_status() -> None:
    kinds = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.DomainError) and c is not errors.DomainError
    ]
    assert kinds and all(k in STATUS_OF for k in kinds), [k.__name__ for k in kinds if k not in STATUS_OF]
    assert status_of(errors.Unavailable("down", dependency="audit")) == 503


def test_services_raise_no_http_status() -> None:
    # a domain error carries a code and words, never an HTTP status: that is the edge's decision
    assert not any(hasattr(exc, "status_code") for exc, _, _ in CASES)


@pytest.mark.parametrize(
    "path", ["/v1/jobs", "/v1/models/m@1/predict", "/v1/registered-models/m/aliases/x", "/v1/datasets"]
)
def test_a_client_hanging_up_mid_body_is_not_a_server_error(sqlite_api, caplog, path: str) -> None:
    """A client that closed the connection while its JSON body arrived made an "unhandled error": a 500 with a
    traceback in the log and in the metrics. It is the client's doing: 400 `client_disconnected`, logged at info."""
    import anyio

    method = "PUT" if "aliases" in path else "POST"
    upload = path == "/v1/datasets"  # a multipart body: the parser met the hang-up (it said "malformed", empty)
    ctype = b"multipart/form-data; boundary=xx" if upload else b"application/json"
    first = (
        b'--xx\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\n\r\na,b\n'
        if upload
        else b'{"records"'
    )
    headers = [(b"content-type", ctype), (b"content-length", b"100"), (b"x-api-key", sqlite_api.key_a.encode())]
    scope = http_scope(method, path, headers)
    messages = [
        {"type": "http.request", "body": first, "more_body": True},
        {"type": "http.disconnect"},
    ]
    started: list[dict] = []

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    body: list[bytes] = []

    async def send(message: dict) -> None:
        if message["type"] == "http.response.start":
            started.append(message)
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    with caplog.at_level("INFO"):
        anyio.run(sqlite_api.app, scope, receive, send)
    assert started and started[0]["status"] == 400, started
    assert b'"code":"client_disconnected"' in b"".join(body), body
    assert not [r for r in caplog.records if r.levelname == "ERROR"], [r.getMessage() for r in caplog.records]
    assert 'status="500"' not in sqlite_api.client.get("/metrics").text
