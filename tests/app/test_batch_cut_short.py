"""predict.csv when the audit store goes away mid-file: the answer is cut short, never answers an unaudited row."""

from __future__ import annotations

import logging
from typing import Any

import pytest

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
    with caplog.at_level(logging.ERROR):  # the server closes the connection after the rows it has (here: ends)
        url = f"/v1/models/{v['id']}/predict.csv"
        r = api.client.post(url, files={"file": ("b.csv", data, "text/csv")}, headers=api.h())
    assert len(written) == 2 and api.count("audit_log") == sum(written) < 1000
    assert r.status_code == 200 and r.text.count("\n") == 1 + sum(written)  # the header and the audited rows only
    cut = [r for r in caplog.records if "cut short" in r.getMessage()]
    assert len(cut) == 1 and cut[0].rows_sent == sum(written) and cut[0].error_code == "audit_unavailable"
    assert not [r for r in caplog.records if r.exc_info], "the cut was logged once, without a traceback"


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


def _http10_predict_csv(
    api: Any, doc: dict[str, Any], rows: int, *, stays: bool = True
) -> tuple[list[dict[str, Any]], bytes]:
    """predict.csv sent as HTTP/1.0 straight to the ASGI app (a client that stays to the end, or goes away once its
    upload is read): the messages sent and the body bytes."""
    import anyio

    v = api.import_model(doc)
    data = ("age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 100},yes\n" for i in range(rows))).encode()
    body = (
        b'--xx\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\nContent-Type: text/csv\r\n\r\n'
        + data
        + b"\r\n--xx--\r\n"
    )
    headers = [
        (b"content-type", b"multipart/form-data; boundary=xx"),
        (b"content-length", str(len(body)).encode()),
        (b"x-api-key", api.key_a.encode()),
    ]
    scope = {**http_scope("POST", f"/v1/models/{v['id']}/predict.csv", headers), "http_version": "1.0"}
    incoming = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        if not stays:
            return {"type": "http.disconnect"}
        await anyio.sleep_forever()  # the client stays to the end
        raise AssertionError

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(api.app, scope, receive, send)
    return sent, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_an_http10_answer_is_sized_not_chunked(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP/1.0 has no chunked transfer coding, but the server chunks an answer of unknown length all the same: an
    HTTP/1.0 client (a proxy speaking 1.0 upstream, `curl -0`) read chunk sizes as CSV lines. Its answer now has a
    Content-Length (spooled, here past the memory part into a temporary file), and reads as the HTTP/1.1 one."""
    from app.routers import predictions as route

    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(route, "SPOOL_MEMORY_BYTES", 4096)
    sent, body = _http10_predict_csv(sqlite_api, doc, 1000)
    start = sent[0]
    headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    assert start["status"] == 200 and "transfer-encoding" not in headers
    assert int(headers["content-length"]) == len(body) > 4096
    lines = body.decode().splitlines()
    assert lines[0].endswith(",audit_seq") and len(lines) == 1001
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(1000))
    assert [int(line.rsplit(",", 1)[1]) for line in lines[1:]] == list(range(1, 1001))
    assert sqlite_api.count("audit_log") == 1000


def test_an_http10_answer_losing_the_audit_midway_is_a_clean_503(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Sized, the answer starts only once every row is audited: an audit store lost at the third chunk is a 503
    naming the audit, not a cut transfer (the two chunks audited before it are logged as undelivered decisions
    would be: they are in the audit log)."""
    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    calls: list[int] = []
    real = audit.write_rows_or_unavailable

    def fails_third(engine: Any, rows: Any) -> list[int]:
        calls.append(len(rows))
        if len(calls) == 3:
            raise Unavailable("the audit log could not be written", dependency="audit")
        return real(engine, rows)

    monkeypatch.setattr(predictions.audit, "write_rows_or_unavailable", fails_third)
    with caplog.at_level(logging.ERROR, logger="neurules.predictions"):
        sent, body = _http10_predict_csv(sqlite_api, doc, 1000)
    assert sent[0]["status"] == 503, body
    assert b"audit_unavailable" in body and b"index," not in body
    assert sqlite_api.count("audit_log") == sum(calls[:2])
    (cut,) = [r for r in caplog.records if "cut short" in r.getMessage()]
    assert cut.rows_sent == 0 and cut.rows_audited == sum(calls[:2]) and cut.error_code == "audit_unavailable"


def test_an_http10_client_going_away_stops_the_deciding_and_is_logged(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Spooled, an HTTP/1.0 answer went on deciding and auditing every row of the file after its client had gone,
    and logged nothing: now no chunk is decided after the client is seen gone, and the abandoned answer is logged
    with the rows audited for it."""
    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    with caplog.at_level(logging.INFO, logger="neurules.predictions"):
        sent, _ = _http10_predict_csv(sqlite_api, doc, 1000, stays=False)
    assert sent[0]["status"] == 499
    (gone,) = [r for r in caplog.records if "the client went away" in r.getMessage()]
    audited = sqlite_api.count("audit_log")
    assert gone.rows_sent == 0 and 0 < gone.rows_audited == audited < 1000, (gone.rows_audited, audited)


def test_an_http10_answer_without_room_for_its_spool_is_a_503_naming_it(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk under the spool was a 500."""
    import errno
    import tempfile

    from app.routers import predictions as route

    class Full(tempfile.SpooledTemporaryFile):  # type: ignore[type-arg]
        def write(self, s: Any) -> int:
            if self.tell() > 2048:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(s)

    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    monkeypatch.setattr(route.tempfile, "SpooledTemporaryFile", Full)
    sent, body = _http10_predict_csv(sqlite_api, doc, 1000)
    assert sent[0]["status"] == 503, body
    assert b"No space left on device" in body and b"temporary_storage_unavailable" in body
    assert tempfile.gettempdir().encode() not in body  # the server's paths stay in its log
    audited = sqlite_api.count("audit_log")  # decided before the spool ran out: the client is told, before a retry
    assert 0 < audited < 1000 and f"the first {audited} rows of the file had been decided and audited".encode() in body


@pytest.mark.parametrize("where", ["upload", "checked columns"])
def test_a_csv_without_room_on_the_servers_disk_is_a_503_naming_it(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The upload (spooled past 1 MiB) and the checked columns (always spilled to a temporary file) need disk: a full
    one answered 400 `malformed_multipart` (the upload) or 500 (the columns). Now a 503 naming the temporary storage
    before any decision is made or audited."""
    import errno
    import tempfile

    import starlette.datastructures

    if where == "upload":
        real = starlette.datastructures.UploadFile.write

        async def full(self: Any, data: bytes) -> None:
            if self.file.tell() + len(data) > 1024 * 1024:
                raise OSError(errno.ENOSPC, "No space left on device")
            await real(self, data)

        monkeypatch.setattr(starlette.datastructures.UploadFile, "write", full)
    else:
        real_file = tempfile.TemporaryFile

        class Full:
            def __init__(self, **_: Any) -> None:
                self.file = real_file()  # closed through __getattr__ (close)

            def write(self, data: Any) -> int:
                raise OSError(errno.ENOSPC, "No space left on device")

            def __getattr__(self, name: str) -> Any:
                return getattr(self.file, name)

        monkeypatch.setattr(batch.tempfile, "TemporaryFile", Full)
    v = sqlite_api.import_model(doc)
    data = ("age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 100},yes\n" for i in range(200_000))).encode()
    assert len(data) > 1024 * 1024
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict.csv", files={"file": ("b.csv", data, "text/csv")}, headers=sqlite_api.h()
    )
    assert r.status_code == 503, r.text[:300]
    err = r.json()["error"]
    assert err["code"] == "temporary_storage_unavailable" and "No space left on device" in err["message"]
    assert sqlite_api.count("audit_log") == 0
    assert tempfile.gettempdir() not in r.text  # the server's paths stay in its log


def test_an_http10_answer_whose_spilled_rows_cannot_be_read_back_is_a_503_with_the_count(
    sqlite_api, doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later chunk's spilled rows failing to read back (an I/O error) was a 500 after rows had been audited."""
    import errno

    monkeypatch.setattr(batch, "CHUNK_BYTES", 1024)
    real = batch.pickle.load
    calls = [0]

    def fails_third(file: Any) -> Any:  # the third spilled chunk read back
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(errno.EIO, "Input/output error")
        return real(file)

    monkeypatch.setattr(batch.pickle, "load", fails_third)
    sent, body = _http10_predict_csv(sqlite_api, doc, 1000)
    assert sent[0]["status"] == 503, body
    audited = sqlite_api.count("audit_log")
    assert b"temporary_storage_unavailable" in body and b"Input/output error" in body
    assert 0 < audited < 1000 and f"the first {audited} rows of the file had been decided".encode() in body
