"""The lean route of the prediction endpoint answers exactly as FastAPI's own handler does, for good and bad input,
but for one thing: it checks the key before it reads the body (a body without a valid key is a 401, never parsed)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import APIRouter

from app.http.lean_route import LeanRoute
from app.routers import predictions

REC = {"age": 67, "income": 50, "smoker": "yes"}
GOOD = {"records": [REC]}


def _std_router() -> APIRouter:
    """The same endpoint behind FastAPI's generic handler."""
    router = APIRouter(prefix="/std/v1/models")
    router.add_api_route("/{ref}/predict", predictions.predict, methods=["POST"])
    return router


def _cases(key: str, other_key: str) -> list[tuple[str, dict[str, Any]]]:
    json_h = {"X-API-Key": key, "content-type": "application/json"}
    return [
        ("good", {"json": GOOD, "headers": {"X-API-Key": key}}),
        ("bearer", {"json": GOOD, "headers": {"Authorization": f"Bearer {key}"}}),
        ("explain false", {"json": GOOD, "headers": {"X-API-Key": key}, "params": {"explain": "false"}}),
        ("explain 0", {"json": GOOD, "headers": {"X-API-Key": key}, "params": {"explain": "0"}}),
        ("explain bad", {"json": GOOD, "headers": {"X-API-Key": key}, "params": {"explain": "maybe"}}),
        ("explain bad + body bad", {"content": b"[]", "headers": json_h, "params": {"explain": "maybe"}}),
        ("no key", {"json": GOOD}),
        ("wrong key", {"json": GOOD, "headers": {"X-API-Key": "nrk_000000000000_nope"}}),
        ("other tenant", {"json": GOOD, "headers": {"X-API-Key": other_key}}),
        ("no key, bad JSON", {"content": b"{", "headers": {"content-type": "application/json"}}),
        ("no key, bad records", {"json": {"records": []}}),
        ("bad JSON", {"content": b'{"records": [1,', "headers": json_h}),
        ("empty body", {"content": b"", "headers": json_h}),
        ("array body", {"content": b"[]", "headers": json_h}),
        ("no records", {"content": b'{"records": []}', "headers": json_h}),
        ("records object", {"content": b'{"records": {}}', "headers": json_h}),
        ("wrong field", {"content": b'{"rows": []}', "headers": json_h}),
        ("extra field", {"json": {**GOOD, "x": 1}, "headers": {"X-API-Key": key}}),
        ("record missing fields", {"json": {"records": [{}]}, "headers": {"X-API-Key": key}}),
        ("NaN literal", {"content": b'{"records": [{"age": NaN, "income": 1, "smoker": "no"}]}', "headers": json_h}),
        ("UTF-16 body", {"content": '{"records": [1]}'.encode("utf-16"), "headers": json_h}),
        ("text/plain", {"content": b'{"records": [1]}', "headers": {"X-API-Key": key, "content-type": "text/plain"}}),
        ("no content type", {"content": b'{"records": [1]}', "headers": {"X-API-Key": key}}),
        ("+json type", {"content": b'{"records": [1]}', "headers": {**json_h, "content-type": "application/x+json"}}),
        ("deep", {"content": b'{"records": [' + b"[" * 5000 + b"]" * 5000 + b"]}", "headers": json_h}),
        ("long int", {"content": b'{"records": [{"age": ' + b"9" * 5000 + b"}]}", "headers": json_h}),
        ("not UTF-8", {"content": b'{"records": [{"smoker": "\xff"}]}', "headers": json_h}),
        (
            "charset",
            {"content": b'{"records": [1]}', "headers": {**json_h, "content-type": "application/json; charset=utf-8"}},
        ),
    ]


def _audit_seqs(answer: dict[str, Any]) -> list[int]:
    return [p["audit_seq"] for p in answer["predictions"]]


def _unnumbered(answer: Any) -> Any:
    """The answer without its decisions' `audit_seq` (two requests never share an audit record)."""
    if isinstance(answer, dict) and "predictions" in answer:
        return {
            **answer,
            "predictions": [{k: v for k, v in p.items() if k != "audit_seq"} for p in answer["predictions"]],
        }
    return answer


@pytest.mark.parametrize("ref_kind", ["id", "missing"])
def test_lean_route_answers_as_fastapi_does(sqlite_api, doc, ref_kind: str) -> None:
    api = sqlite_api
    api.app.include_router(_std_router())
    v = api.import_model(doc)
    ref = v["id"] if ref_kind == "id" else "mv_missing"
    lean_route = next(r for r in predictions.router.routes if getattr(r, "path", "").endswith("/{ref}/predict"))
    assert isinstance(lean_route, LeanRoute) and lean_route._principal_name() == "principal"  # the lean handler
    statuses = []
    for label, kwargs in _cases(api.key_a, api.key_b):
        lean = api.client.post(f"/v1/models/{ref}/predict", **kwargs)
        std = api.client.post(f"/std/v1/models/{ref}/predict", **kwargs)
        if label == "no key, bad JSON":  # the key first, as every other route: FastAPI's handler parses first
            assert (lean.status_code, std.status_code) == (401, 422), (lean.text, std.text)
            statuses.append(lean.status_code)
            continue
        assert (lean.status_code, _unnumbered(lean.json())) == (std.status_code, _unnumbered(std.json())), label
        if lean.status_code == 200:  # each decision has its own audit record: the next one in the chain
            assert _audit_seqs(std.json()) == [s + 1 for s in _audit_seqs(lean.json())], label
        statuses.append(lean.status_code)
    expected = {200, 401, 404, 422} if ref_kind == "id" else {401, 404, 422}
    assert set(statuses) == expected
    assert api.count("audit_log") == 2 * statuses.count(200)  # one record per good request, on both routes


def test_lean_route_honours_dependency_overrides(sqlite_api, doc) -> None:
    """An app that overrides the principal (tests, an embedding app) gets it on the lean route too."""
    from app.deps import current_principal
    from app.services.auth import Principal

    api = sqlite_api
    v = api.import_model(doc)
    api.app.dependency_overrides[current_principal] = lambda: Principal(api.tenant_a, "test-key")
    try:
        assert api.client.get("/v1/models").status_code == 200  # FastAPI's solver, no key sent
        assert api.client.post(f"/v1/models/{v['id']}/predict", json=GOOD).status_code == 200
    finally:
        api.app.dependency_overrides.clear()


def test_a_large_body_without_a_key_is_refused_before_it_is_parsed(sqlite_api, monkeypatch) -> None:
    """A probe's 42 MB body with no key held the event loop for a second (parsed, then refused 401), and a
    malformed one without a key was a 422 (every other route answers 401 first)."""
    from app.http import lean_route

    parsed: list[int] = []
    real = lean_route._parse_json
    monkeypatch.setattr(lean_route, "_parse_json", lambda raw: parsed.append(len(raw)) or real(raw))
    big = b'{"records": [' + b",".join([b'{"age": 1, "income": 2, "smoker": "no"}'] * 20_000) + b"]}"
    for body in (big, b"{"):
        r = sqlite_api.client.post(
            "/v1/models/mv_any/predict", content=body, headers={"content-type": "application/json"}
        )
        assert r.status_code == 401, r.text
    assert parsed == []
    r = sqlite_api.client.post(
        "/v1/models/mv_any/predict", content=big, headers={**sqlite_api.h(), "content-type": "application/json"}
    )
    assert r.status_code == 413 and parsed == [len(big)], r.text  # with the key: parsed (off the loop), counted
