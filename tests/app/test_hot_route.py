"""The direct dispatch of one-record prediction answers exactly as the application's full stack does."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry import trace

from app.http.hot_route import HotRouteMiddleware
from app.main import create_app
from app.routers import predictions

GOOD = {"records": [{"age": 67, "income": 50, "smoker": "yes"}]}


def _without_hot_route(api: Any) -> Any:
    """A second app on the same database and settings whose stack has no direct dispatch."""
    app = create_app(api.settings, queue=api.queue, configure_logs=False)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not HotRouteMiddleware]
    return app


def _comparable(r: Any) -> tuple[int, Any, str | None]:
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text
    if isinstance(body, dict) and "predictions" in body:  # two requests never share an audit record
        body = {**body, "predictions": [{k: v for k, v in p.items() if k != "audit_seq"} for p in body["predictions"]]}
    if isinstance(body, dict) and "error" in body:  # nor a request id (a 500 names its own)
        body = {"error": {**body["error"], "message": re.sub(r" \(request id \w+\)", "", body["error"]["message"])}}
    return r.status_code, body, r.headers.get("content-type")


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the direct dispatch took."""
    seen: list[str] = []
    match = HotRouteMiddleware._match

    def spy(self: HotRouteMiddleware, scope: Any) -> Any:
        found = match(self, scope)
        if found is not None:
            seen.append(scope["path"])
        return found

    monkeypatch.setattr(HotRouteMiddleware, "_match", spy)
    return seen


def test_only_the_prediction_route_is_dispatched_directly(sqlite_api, doc, taken: list[str]) -> None:
    api = sqlite_api
    v = api.import_model(doc)
    assert [r.path for r, _ in predictions.hot_routes()] == ["/v1/models/{ref}/predict"]
    assert api.client.post(f"/v1/models/{v['id']}/predict", json=GOOD, headers=api.h()).status_code == 200
    assert taken == [f"/v1/models/{v['id']}/predict"]
    taken.clear()
    for method, path in [
        ("GET", f"/v1/models/{v['id']}/predict"),  # 405, by the router
        ("POST", f"/v1/models/{v['id']}/predict/"),
        ("POST", f"/v1/models/{v['id']}/predict.csv"),
        ("POST", f"/v1/models/{v['id']}/x/predict"),
        ("GET", f"/v1/models/{v['id']}"),
    ]:
        api.client.request(method, path, json=GOOD, headers=api.h(), follow_redirects=False)
    assert taken == []


def test_dependency_overrides_take_the_full_stack(sqlite_api, doc, taken: list[str]) -> None:
    from app.deps import current_principal
    from app.services.auth import Principal

    api = sqlite_api
    v = api.import_model(doc)
    api.app.dependency_overrides[current_principal] = lambda: Principal(api.tenant_a, "test-key")
    try:
        assert api.client.post(f"/v1/models/{v['id']}/predict", json=GOOD).status_code == 200  # no key sent
    finally:
        api.app.dependency_overrides.clear()
    assert taken == []


def test_answers_and_metrics_match_the_full_stack(sqlite_api, doc, monkeypatch: pytest.MonkeyPatch) -> None:
    """Good and bad requests, a missing model, a database error and an unexpected one: the same answers."""
    api = sqlite_api
    v = api.import_model(doc)
    h = {**api.h(), "content-type": "application/json"}
    cases: list[tuple[str, dict[str, Any]]] = [
        (v["id"], {"json": GOOD, "headers": api.h()}),
        (f"risk@{v['version']}", {"json": GOOD, "headers": api.h(), "params": {"explain": "false"}}),
        (v["id"], {"json": GOOD, "headers": api.h(), "params": {"explain": "maybe"}}),
        (v["id"], {"json": {**GOOD, "explain": "none"}, "headers": api.h(), "params": {"explain": "true"}}),
        (v["id"], {"json": GOOD, "headers": api.h(), "params": {"unknown": "1"}}),
        (v["id"], {"json": GOOD}),
        (v["id"], {"json": GOOD, "headers": {"Authorization": f"Bearer {api.key_b}"}}),
        ("mv_missing", {"json": GOOD, "headers": api.h()}),
        (v["id"], {"content": b'{"records": [1,', "headers": h}),
        (v["id"], {"content": b'{"records": [{"age": 1, "age": 2}]}', "headers": h}),
        (v["id"], {"content": b"\xff", "headers": h}),
        (v["id"], {"json": {"records": [{"age": "x", "income": 1, "smoker": "no"}]}, "headers": api.h()}),
        (v["id"], {"json": {"records": [GOOD["records"][0]] * 10_001}, "headers": api.h()}),
        ("caf%C3%A9", {"json": GOOD, "headers": api.h()}),
    ]
    direct_client = TestClient(api.app, raise_server_exceptions=False)  # the app's lifespan runs under api.client
    with TestClient(_without_hot_route(api), raise_server_exceptions=False) as full:
        for ref, kwargs in cases:
            direct = direct_client.post(f"/v1/models/{ref}/predict", **kwargs)
            stacked = full.post(f"/v1/models/{ref}/predict", **kwargs)
            assert _comparable(direct) == _comparable(stacked), (ref, kwargs.get("params"), direct.text)
            assert "x-request-id" in direct.headers
        for error in (RuntimeError("boom"), _operational_error()):
            monkeypatch.setattr(predictions.predictions, "decide_records", _raising(error))
            direct = direct_client.post(f"/v1/models/{v['id']}/predict", json=GOOD, headers=api.h())
            stacked = full.post(f"/v1/models/{v['id']}/predict", json=GOOD, headers=api.h())
            assert _comparable(direct) == _comparable(stacked)
            assert direct.status_code == (500 if isinstance(error, RuntimeError) else 503)
    metrics = api.client.get("/metrics").text
    assert 'route="/v1/models/{ref}/predict",status="200"' in metrics  # labelled by its route, as before
    assert 'route="/v1/models/{ref}/predict",status="500"' in metrics


def _raising(error: Exception) -> Any:
    def decide(*_a: Any, **_k: Any) -> Any:
        raise error

    return decide


def _operational_error() -> Exception:
    from sqlalchemy.exc import OperationalError

    return OperationalError("SELECT 1", {}, Exception("could not connect to server"))


def test_handlers_are_found_as_starlette_finds_them() -> None:
    """A status-code handler of an HTTPException, the most specific class handler, the catch-all outwards."""
    from fastapi import FastAPI, HTTPException
    from fastapi.responses import PlainTextResponse

    class Base(Exception):
        pass

    class Specific(Base):
        pass

    app = FastAPI()

    @app.post("/raise/{what}")
    async def route(what: str) -> None:
        """Documented here; the direct dispatch calls `boom` below."""

    async def boom(request: Any) -> None:
        what = request.path_params["what"]
        raise {"http": HTTPException(418), "specific": Specific(), "base": Base(), "other": KeyError()}[what]

    app.exception_handler(418)(lambda _r, _e: PlainTextResponse("teapot", status_code=418))
    app.exception_handler(Base)(lambda _r, e: PlainTextResponse(type(e).__name__, status_code=409))
    app.exception_handler(Exception)(lambda _r, _e: PlainTextResponse("unexpected", status_code=500))
    hot = [(r, boom) for r in app.routes if getattr(r, "path", "") == "/raise/{what}"]
    app.add_middleware(HotRouteMiddleware, fastapi_app=app, routes=hot)
    client = TestClient(app, raise_server_exceptions=False)
    answers = {w: client.post(f"/raise/{w}") for w in ("http", "specific", "base", "other")}
    assert {w: (r.status_code, r.text) for w, r in answers.items()} == {
        "http": (418, "teapot"),
        "specific": (409, "Specific"),
        "base": (409, "Base"),
        "other": (500, "unexpected"),
    }


class _Span(trace.NonRecordingSpan):
    """Records its name and attributes (FastAPI names the span after the route once its router matched)."""

    def __init__(self, name: str, spans: list[_Span]) -> None:
        super().__init__(trace.INVALID_SPAN_CONTEXT)
        self.name, self.attrs = name, {}
        spans.append(self)

    def set_attribute(self, key: str, value: Any) -> None:
        self.attrs[key] = value

    def set_attributes(self, attributes: Any) -> None:
        self.attrs.update(attributes)

    def update_name(self, name: str) -> None:
        self.name = name


class _RecordingProvider(trace.TracerProvider):
    def __init__(self) -> None:
        self.spans: list[_Span] = []

    def get_tracer(self, *_a: Any, **_k: Any) -> trace.Tracer:
        spans = self.spans

        class _Tracer(trace.NoOpTracer):
            def start_span(self, name: str, *_a: Any, **_k: Any) -> _Span:  # type: ignore[override]
                return _Span(name, spans)

        return _Tracer()


def test_opentelemetry_spans_name_the_route(tmp_path: Any, doc, monkeypatch: pytest.MonkeyPatch) -> None:
    """With FastAPI's OpenTelemetry on, a prediction's span carries its route, as on the full stack."""
    from tests.conftest import make_api

    provider = _RecordingProvider()
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)
    api_gen = make_api(tmp_path, "sqlite", opentelemetry="on")
    api = next(api_gen)
    try:
        v = api.import_model(doc)
        with TestClient(_without_hot_route(api)) as full:
            for client in (api.client, full):
                provider.spans.clear()
                assert client.post(f"/v1/models/{v['id']}/predict", json=GOOD, headers=api.h()).status_code == 200
                named = [(s.name, s.attrs.get("http.route")) for s in provider.spans if "http.route" in s.attrs]
                assert named == [("POST /v1/models/{ref}/predict", "/v1/models/{ref}/predict")]
    finally:
        api_gen.close()
