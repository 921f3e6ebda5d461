"""The product's main flow against real processes, in distributed and embedded mode.

Upload heart.csv, train 10 rules with few epochs, poll to success, predict 20 records and check
each reported rule against the first rule of the stored document whose conditions hold —
recomputed here from the JSON document itself, independently of models.RuleList.
"""

from __future__ import annotations

import csv
import io
import math
import time
from typing import Any

import httpx
import pytest

from tests.conftest import DATASETS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

EPOCHS = 20


def key_of(v: Any) -> str | None:
    """Category key, as docs/rulelist-format.md defines it (re-implemented here on purpose)."""
    if v is None or v == "" or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def first_matching_rule(doc: dict[str, Any], record: dict[str, Any]) -> int:
    """Rule id (1-based, 0 = default) by the document's semantics."""
    feats = {f["name"]: f for f in doc["features"]}
    for j, rule in enumerate(doc["rules"], start=1):
        ok = True
        for c in rule["conditions"]:
            f = feats[c["feature"]]
            v = record[c["feature"]]
            if c["op"] == "between":
                x = f["fill_value"] if v is None else float(v)
                ok = (c["low"] is None or x >= c["low"]) and (c["high"] is None or x <= c["high"])
            else:
                inside = key_of(v) in c["values"]
                ok = inside if c["op"] == "in" else not inside
            if not ok:
                break
        if ok:
            return j
    return 0


def heart_records(n: int) -> list[dict[str, Any]]:
    """The first n rows of heart.csv without the target, values as JSON numbers."""
    with open(DATASETS / "heart.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))[:n]
    out = []
    for r in rows:
        r.pop("target")
        out.append({k: (float(v) if v not in ("", "?") else None) for k, v in r.items()})
    return out


def train(client: httpx.Client, epochs: int = EPOCHS) -> tuple[dict[str, Any], str]:
    """Upload heart.csv and train until success; returns (job, dataset id)."""
    with open(DATASETS / "heart.csv", "rb") as fh:
        r = client.post("/v1/datasets", files={"file": ("heart.csv", fh, "text/csv")})
    assert r.status_code == 201, r.text
    ds = r.json()
    assert ds["n_rows"] == 270
    r = client.post(
        "/v1/jobs",
        json={
            "dataset_id": ds["id"],
            "target": "target",
            "model_name": "heart",
            "parameters": {"n_rules": 10, "epochs": epochs, "random_state": 1},
        },
    )
    assert r.status_code == 202, r.text
    job = r.json()
    seen = set()
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job['id']}").json()
        seen.add(job["state"])
        if job["state"] in ("succeeded", "failed", "cancelled"):
            break
        time.sleep(0.3)
    assert job["state"] == "succeeded", job
    assert job["progress"]["epoch"] == job["progress"]["n_epochs"] == epochs
    return job, ds["id"]


def check_flow(url: str, key: str) -> None:
    """The issue's end-to-end flow."""
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=30) as client:
        job, _ = train(client)
        mv = client.get(f"/v1/models/{job['model_version_id']}").json()
        doc = mv["rule_list"]
        assert mv["name"] == "heart" and 1 <= len(doc["rules"]) <= 10
        assert mv["metrics"]["holdout"]["n_rows"] == 54 and mv["provenance"]["dataset_sha256"]
        held_out = mv["metrics"]["holdout_evaluation"]
        assert held_out["n_rows"] == 54 and sum(r["n"] for r in held_out["rules"]) == 54
        points = client.get(f"/v1/jobs/{job['id']}/history").json()["points"]
        epochs = [p["epoch"] for p in points]
        assert epochs == sorted(epochs) and epochs[-1] == EPOCHS and len(epochs) >= 3, points
        assert mv["provenance"]["packages"]["torch"] != "absent"

        records = heart_records(20)
        r = client.post(f"/v1/models/{mv['id']}/predict", json={"records": records})
        assert r.status_code == 200, r.text
        preds = r.json()["predictions"]
        assert len(preds) == 20
        for rec, p in zip(records, preds, strict=True):
            expected = first_matching_rule(doc, rec)
            assert p["rule_id"] == expected, (rec, p)
            assert abs(sum(p["probabilities"].values()) - 1.0) < 1e-9
            rule = doc["default"] if expected == 0 else doc["rules"][expected - 1]
            assert list(p["probabilities"].values()) == pytest.approx(rule["probabilities"])
            assert p["explanation"]["rule_id"] == expected
            assert len(p["explanation"]["not_fired"]) == (expected - 1 if expected else len(doc["rules"]))

        # promote and predict through the alias; CSV batch agrees with the JSON answers
        r = client.put("/v1/registered-models/heart/aliases/production", json={"version_id": mv["id"]})
        assert r.status_code == 200
        r = client.post("/v1/models/heart@production/predict", json={"records": records[:3]})
        assert r.status_code == 200 and r.json()["model_version"]["id"] == mv["id"]
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(list(records[0]))
        for rec in records:
            w.writerow(["" if v is None else v for v in rec.values()])
        r = client.post(
            "/v1/models/heart@production/predict.csv",
            files={"file": ("batch.csv", buf.getvalue().encode(), "text/csv")},
        )
        assert r.status_code == 200, r.text
        rows = list(csv.DictReader(io.StringIO(r.text)))
        assert [int(x["rule_id"]) for x in rows] == [p["rule_id"] for p in preds]

        # bad input on the real server: 422 naming the field
        bad = dict(records[0])
        bad.pop("att_1")
        r = client.post("/v1/models/heart@production/predict", json={"records": [records[0], bad]})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("records[1].att_1")
        assert "neurules_predictions_total" in httpx.get(f"{url}/metrics").text


def check_cancel(url: str, key: str) -> None:
    """A long job is cancelled cooperatively at its next epoch."""
    with httpx.Client(base_url=url, headers={"X-API-Key": key}, timeout=30) as client:
        ds = client.get("/v1/datasets").json()["items"][0]["id"]
        job = client.post(
            "/v1/jobs", json={"dataset_id": ds, "target": "target", "parameters": {"n_rules": 10, "epochs": 5000}}
        ).json()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = client.get(f"/v1/jobs/{job['id']}").json()
            if state["state"] == "running" and state["progress"]["epoch"] > 0:
                break
            time.sleep(0.2)
        r = client.post(f"/v1/jobs/{job['id']}/cancel")
        assert r.status_code == 202
        while time.monotonic() < deadline:
            state = client.get(f"/v1/jobs/{job['id']}").json()
            if state["state"] != "running":
                break
            time.sleep(0.2)
        assert state["state"] == "cancelled", state
        assert state["progress"]["epoch"] < 5000


def test_distributed_flow(distributed) -> None:
    try:
        check_flow(distributed.url, distributed.key)
    except AssertionError:
        print(distributed.logs())
        raise


def test_distributed_cancel(distributed) -> None:
    try:
        check_cancel(distributed.url, distributed.key)
    except AssertionError:
        print(distributed.logs())
        raise


def test_embedded_flow(embedded) -> None:
    try:
        check_flow(embedded.url, embedded.key)
    except AssertionError:
        print(embedded.logs())
        raise


def _raw_exchange(url: str, request: bytes) -> tuple[str, bytes]:
    """Send raw request bytes to the server; its status line and headers, and the body bytes as they came."""
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(url)
    with socket.create_connection((u.hostname, u.port), timeout=60) as s:
        s.sendall(request)
        data = b""
        while chunk := s.recv(1 << 16):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body


def test_an_http10_client_gets_a_sized_predict_csv_answer(embedded) -> None:
    """The real server (uvicorn) chunked a streamed predict.csv answer for an HTTP/1.0 request too, which such a
    client (a proxy speaking 1.0 upstream, `curl -0`) read as CSV lines like `3c`: it now gets a Content-Length and
    the plain CSV; an HTTP/1.1 client still gets it streamed, chunked."""
    from tests.conftest import rule_list_doc

    h = {"X-API-Key": embedded.key}
    v = httpx.post(f"{embedded.url}/v1/models", json={"name": "http10", "rule_list": rule_list_doc()}, headers=h)
    assert v.status_code == 201, v.text
    data = "age,income,smoker\n" + "".join(f"{60 + i % 20},{i % 9},{'yes' if i % 2 else 'no'}\n" for i in range(5000))
    part = (
        b'--xx\r\nContent-Disposition: form-data; name="file"; filename="a.csv"\r\nContent-Type: text/csv\r\n\r\n'
        + data.encode()
        + b"\r\n--xx--\r\n"
    )
    answers = {}
    for version in ("1.0", "1.1"):
        head = (
            f"POST /v1/models/{v.json()['id']}/predict.csv HTTP/{version}\r\nHost: t\r\nX-API-Key: {embedded.key}\r\n"
            "Connection: close\r\nContent-Type: multipart/form-data; boundary=xx\r\n"
            f"Content-Length: {len(part)}\r\n\r\n"
        )
        answers[version] = _raw_exchange(embedded.url, head.encode() + part)
    head10, body10 = answers["1.0"]
    assert head10.split("\r\n")[0].endswith("200 OK") and "transfer-encoding" not in head10.lower(), head10
    assert f"content-length: {len(body10)}" in head10.lower(), head10
    rows = list(csv.DictReader(io.StringIO(body10.decode())))
    assert [int(r["index"]) for r in rows] == list(range(5000))
    seqs = [int(r["audit_seq"]) for r in rows]
    assert seqs == list(range(seqs[0], seqs[0] + 5000))
    head11, body11 = answers["1.1"]
    assert "transfer-encoding: chunked" in head11.lower(), head11
    assert body10.decode().splitlines()[0] in body11.decode()


def test_distributed_worker_killed_mid_job_is_recovered(distributed) -> None:
    """SIGKILL the only worker while it trains: the reaper requeues the job and a new worker finishes it."""
    import os
    import signal

    with httpx.Client(base_url=distributed.url, headers={"X-API-Key": distributed.key}, timeout=30) as client:
        ds = client.get("/v1/datasets").json()["items"][0]["id"]
        job = client.post(
            "/v1/jobs", json={"dataset_id": ds, "target": "target", "parameters": {"n_rules": 5, "epochs": 400}}
        ).json()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = client.get(f"/v1/jobs/{job['id']}").json()
            if state["state"] == "running" and state["progress"]["epoch"] > 0:
                break
            time.sleep(0.1)
        victims = [p for p in distributed.procs if "celery" in p.p.args[0] and p.p.poll() is None]
        for p in victims:
            os.killpg(p.p.pid, signal.SIGKILL)
            p.p.wait(10)
        distributed.spawn_worker(f"replacement-{job['id'][-6:]}")
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            state = client.get(f"/v1/jobs/{job['id']}").json()
            if state["state"] in ("succeeded", "failed", "cancelled"):
                break
            time.sleep(0.3)
        assert state["state"] == "succeeded", (state, distributed.logs())
        assert state["attempts"] == 2 and state["model_version_id"]


def test_two_server_processes_share_the_port_and_metrics(embedded_two_processes) -> None:
    """Both processes answer; /metrics aggregates them; a second server on the same port is refused."""
    import re
    import subprocess

    from tests.conftest import rule_list_doc
    from tests.e2e.conftest import ADMIN

    svc = embedded_two_processes
    with httpx.Client(base_url=svc.url, headers={"X-API-Key": svc.key}, timeout=30) as client:
        v = client.post("/v1/models", json={"name": "m", "rule_list": rule_list_doc()}).json()
        rec = {"age": 70, "income": 5, "smoker": "yes"}
        for _ in range(40):  # new connections are spread over both listeners
            with httpx.Client(base_url=svc.url, headers={"X-API-Key": svc.key}) as one:
                assert one.post(f"/v1/models/{v['id']}/predict", json={"records": [rec]}).status_code == 200
        text = client.get("/metrics").text
        assert re.search(r'neurules_predictions_total\{endpoint="json"\} 40\.0', text), text[-2000:]
        assert len(client.get("/v1/audit", params={"limit": 100}).json()["items"]) == 40
    import json as _json

    pids = {
        _json.loads(line)["pid"]
        for line in svc.procs[0].log_path.read_text().splitlines()
        if line.startswith("{") and '"route": "/v1/models/{ref}/predict"' in line
    }
    assert len(pids) == 2, pids
    port = svc.url.rsplit(":", 1)[1]
    out = subprocess.run(
        [*ADMIN, "serve", "--port", port],
        env=svc.env,
        cwd=svc.tmp,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0 and "already in use" in out.stderr
