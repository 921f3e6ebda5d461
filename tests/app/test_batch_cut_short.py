"""predict.csv when the audit store goes away mid-file: the answer is cut short, never answers an unaudited row."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.routers.predictions import AnswerCutShort
from app.services import audit, batch, predictions
from app.services.errors import Unavailable


def test_audit_lost_mid_stream_cuts_the_answer_and_logs_it(
    api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    v = api.import_model(doc)
    written: list[int] = []
    real = audit.write_rows_or_unavailable

    def fails_third(engine: Any, rows: Any) -> None:
        if len(written) == 2:
            raise Unavailable("the audit log could not be written", dependency="audit")
        real(engine, rows)
        written.append(len(rows))

    monkeypatch.setattr(predictions.audit, "write_rows_or_unavailable", fails_third)
    data = ("age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 100},yes\n" for i in range(1000))).encode()
    with caplog.at_level(logging.ERROR, logger="neurules.predictions"), pytest.raises(AnswerCutShort):
        url = f"/v1/models/{v['id']}/predict.csv"
        api.client.post(url, files={"file": ("b.csv", data, "text/csv")}, headers=api.h())
    assert len(written) == 2 and api.count("audit_log") == sum(written) < 1000
    cut = [r for r in caplog.records if "cut short" in r.getMessage()]
    assert len(cut) == 1 and cut[0].rows_sent == sum(written) and cut[0].error_code == "audit_unavailable"
