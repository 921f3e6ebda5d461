"""predict.csv when the audit store goes away mid-file: the answer is cut short, never answers an unaudited row."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.routers.predictions import AnswerCutShort
from app.services import audit, batch, predictions
from app.services.errors import Unavailable
from tests.conftest import http_scope


def test_audit_lost_mid_stream_cuts_the_answer_and_logs_it(
    api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    v = api.import_model(doc)
    written: list[int] = []
    real = audit.write_rows_or_unavailable

    def fails_third(engine: Any, rows: Any) -> list[int]:
        if len(written) == 2:
            raise Unavailable("the audit log could not be written", dependency="audit")
        seqs = real(engine, rows)
        written.append(len(rows))
        return seqs

    monkeypatch.setattr(predictions.audit, "write_rows_or_unavailable", fails_third)
    data = ("age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 100},yes\n" for i in range(1000))).encode()
    with caplog.at_level(logging.ERROR, logger="neurules.predictions"), pytest.raises(AnswerCutShort):
        url = f"/v1/models/{v['id']}/predict.csv"
        api.client.post(url, files={"file": ("b.csv", data, "text/csv")}, headers=api.h())
    assert len(written) == 2 and api.count("audit_log") == sum(written) < 1000
    cut = [r for r in caplog.records if "cut short" in r.getMessage()]
    assert len(cut) == 1 and cut[0].rows_sent == sum(written) and cut[0].error_code == "audit_unavailable"


def test_a_client_going_away_mid_answer_is_logged_with_the_rows_audited(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that hung up mid-answer left a 200 in the log and nothing else, while the audit held the rows
    decided for it: the abandoned answer is logged with the rows sent and the rows decided and audited."""
    import anyio

    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    v = sqlite_api.import_model(doc)
    data = ("age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 100},yes\n" for i in range(2000))).encode()
    body = (
        b'--xx\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\nContent-Type: text/csv\r\n\r\n'
        + data
        + b"\r\n--xx--\r\n"
    )
    path = f"/v1/models/{v['id']}/predict.csv"
    headers = [
        (b"content-type", b"multipart/form-data; boundary=xx"),
        (b"content-length", str(len(body)).encode()),
        (b"x-api-key", sqlite_api.key_a.encode()),
    ]
    scope = http_scope("POST", path, headers)
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    hung_up = anyio.Event()
    sent: list[bytes] = []

    async def receive() -> dict:
        if incoming:
            return incoming.pop(0)
        await hung_up.wait()  # the client reads the first rows, then goes away
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            sent.append(message["body"])
            if len(sent) == 3:
                hung_up.set()
            await anyio.sleep(0.01)

    with caplog.at_level(logging.INFO, logger="neurules.predictions"):
        anyio.run(sqlite_api.app, scope, receive, send)
    (gone,) = [r for r in caplog.records if "the client went away" in r.getMessage()]
    audited = sqlite_api.count("audit_log")
    assert 0 < gone.rows_sent <= gone.rows_audited == audited < 2000, (gone.rows_sent, gone.rows_audited, audited)
    assert not [r for r in caplog.records if "cut short" in r.getMessage()]
