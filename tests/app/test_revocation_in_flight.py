"""A key revoked while its request is in flight: no decision after the key cache's bound, however slow the request.

A bound probe sent a predict's body a byte every 2 s and revoked the key meanwhile: the request was decided and
audited 46 s later (the key was read with the headers only), and a predict.csv answer read slowly went on deciding
166,659 rows after the bound. The make_api fixture caches keys for 0 s, so a revocation shows at the next check.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Api

HEADER = b"age,income,smoker\n"
ROW = b"67,50,yes\n"


def _revoker(api: Api) -> Any:
    """A function revoking the caller's key (its id read now: the test client cannot be called from the app)."""
    from app.admin import revoke_key

    (mine,) = [k for k in api.client.get("/v1/keys", headers=api.h()).json()["items"] if k["current"]]
    return lambda: revoke_key(api.url, mine["id"])


def _audited(api: Api) -> int:
    return api.count("audit_log")


def test_a_json_body_that_arrived_slowly_is_decided_with_the_key_as_it_is_then(
    sqlite_api: Api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.http import lean_route

    v = sqlite_api.import_model(doc)
    revoke = _revoker(sqlite_api)
    real_body = lean_route.Request.body

    async def slow_body(request: Any) -> bytes:  # the key is revoked while the body arrives
        raw = await real_body(request)
        revoke()
        return raw

    monkeypatch.setattr(lean_route.Request, "body", slow_body)
    monkeypatch.setattr(lean_route, "SLOW_BODY_S", -1.0)  # every body counts as slow here
    before = _audited(sqlite_api)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict",
        json={"records": [{"age": 67, "income": 50, "smoker": "yes"}]},
        headers=sqlite_api.h(),
    )
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
    assert _audited(sqlite_api) == before


def test_a_csv_upload_that_arrived_slowly_is_decided_with_the_key_as_it_is_then(
    sqlite_api: Api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from contextlib import asynccontextmanager

    from app.routers import predictions

    v = sqlite_api.import_model(doc)
    revoke = _revoker(sqlite_api)
    real_stream = predictions.upload_stream

    @asynccontextmanager
    async def slow_upload(*args: Any, **kwargs: Any) -> Any:
        async with real_stream(*args, **kwargs) as upload:
            revoke()  # revoked while the upload arrived
            yield upload

    monkeypatch.setattr(predictions, "upload_stream", slow_upload)
    before = _audited(sqlite_api)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv",
        files={"file": ("x.csv", HEADER + ROW * 3, "text/csv")},
        headers=sqlite_api.h(),
    )
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", r.text
    assert _audited(sqlite_api) == before


def test_a_key_revoked_while_the_csv_answer_streams_decides_no_further_chunk(
    sqlite_api: Api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from fastapi.testclient import TestClient

    from app.services import batch, predictions

    v = sqlite_api.import_model(doc)
    revoke = _revoker(sqlite_api)
    monkeypatch.setattr(batch, "CHUNK_ROWS", 4)
    real_next = predictions.CsvBatch.next_chunk
    calls = {"n": 0}

    def revoking_next(self: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:  # the first chunk was decided and sent: the key goes now
            revoke()
        return real_next(self)

    monkeypatch.setattr(predictions.CsvBatch, "next_chunk", revoking_next)
    before = _audited(sqlite_api)
    client = TestClient(sqlite_api.app)  # the server closes the connection after the rows it has (here: ends)
    r = client.post(
        f"/v1/models/{v['id']}/predict.csv",
        files={"file": ("x.csv", HEADER + ROW * 20, "text/csv")},
        headers=sqlite_api.h(),
    )
    audited = _audited(sqlite_api) - before
    assert 0 < audited < 20 and r.text.count("\n") == 1 + audited, (audited, r.text)
    (stop,) = [x for x in caplog.records if x.name == "neurules.predictions" and "predict.csv" in x.getMessage()]
    assert stop.levelname == "WARNING" and "revoked" in stop.getMessage() and not stop.exc_info
