"""docs/audit.md's recipe for `input_digest`, written here from the document alone, against the digests the service
stores for JSON records and CSV rows: a client that follows the document finds its decisions."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from sqlalchemy import text

MISSING_TOKENS = {"", "NA", "N/A", "n/a", "NaN", "nan", "null", "NULL", "None", "?"}  # as the document lists them
NUMERIC = {"age", "income"}  # the test rule list's fields (tests/conftest.py); smoker is categorical
LEVELS = {"smoker": {"yes", "no"}}


def _number(v: float) -> Any:
    return int(v) if v.is_integer() else v  # json.dumps writes a float as Python's repr


def _category(v: Any, from_json: bool, field: str) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    if from_json and v in LEVELS.get(field, ()):
        return v
    t = v.strip()
    return None if t in MISSING_TOKENS else t


def documented_digest(record: dict[str, Any], *, from_json: bool) -> str:
    """The digest as docs/audit.md tells a client to compute it (CSV rows given as their cells' text)."""
    out: dict[str, Any] = {}
    for k, v in record.items():
        if v is None or (isinstance(v, float) and math.isnan(v)) or (not from_json and v == ""):
            out[k] = None
        elif k in NUMERIC:
            out[k] = _number(float(v))
        else:
            out[k] = _category(v, from_json, k)
    return hashlib.sha256(json.dumps(out, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


JSON_RECORDS: list[dict[str, Any]] = [
    {"age": 67, "income": 50, "smoker": "yes"},
    {"age": 67.0, "income": 50.25, "smoker": " yes "},
    {"age": 30, "income": 0.1, "smoker": 1},  # a categorical value sent as a number: its key "1"
    {"age": 30, "income": 0.1, "smoker": 1.0},
    {"age": 30, "income": 0.1, "smoker": "1"},
    {"age": 30, "income": 0.1, "smoker": True},
    {"age": 30, "income": 0.1, "smoker": 2.5},
    {"age": 9007199254740993, "income": 1e-7, "smoker": "NA"},  # beyond 2**53: the double it is read as
    {"age": None, "income": float("nan"), "smoker": None},
    {"age": -0.0, "income": 1e22, "smoker": "é"},
]
CSV_FILES = [
    "age,income,smoker\n67,50,yes\n67.0,50.25, yes \n30,0.1,1\n9007199254740993,1e-7,NA\n,,\n-0.0,1e22,é\n",
    "age,income,smoker\n30,0.1,1\n31,0.2,0\n32.5,1e3,2.5\n",  # every cell a number: the typed fast path
]


def _rows(api: Any) -> list[dict[str, Any]]:
    with api.app.state.service.db.engine.connect() as c:
        return [dict(m) for m in c.execute(text("SELECT seq, input_digest FROM audit_log ORDER BY seq")).mappings()]


def _csv_records(data: str) -> list[dict[str, str]]:
    lines = data.strip("\n").split("\n")
    names = lines[0].split(",")
    return [dict(zip(names, line.split(","), strict=True)) for line in lines[1:]]


def test_the_documented_digest_finds_every_decision(sqlite_api, doc) -> None:
    v = sqlite_api.import_model(doc)
    body = json.dumps({"records": JSON_RECORDS})  # NaN as Python's json writes it (what Python clients send)
    headers = {**sqlite_api.h(), "content-type": "application/json"}
    r = sqlite_api.client.post(f"/v1/models/{v['id']}/predict", content=body, headers=headers)
    assert r.status_code == 200, r.text
    expected = [documented_digest(rec, from_json=True) for rec in JSON_RECORDS]
    for data in CSV_FILES:
        r = sqlite_api.client.post(
            f"/v1/models/{v['id']}/predict.csv",
            files={"file": ("b.csv", data.encode(), "text/csv")},
            headers=sqlite_api.h(),
        )
        assert r.status_code == 200, r.text
        expected += [documented_digest(rec, from_json=False) for rec in _csv_records(data)]
    stored = [row["input_digest"] for row in _rows(sqlite_api)]
    assert stored == expected
    for sent in ("1", "1.0", "True"):  # the same decision whatever the sender's type: the same digest
        assert len({stored[2], stored[3], stored[4]}) == 1, sent
    assert stored[2] == stored[len(JSON_RECORDS) + 2]  # the JSON record and the CSV row `30,0.1,1`
    assert stored[0] == stored[len(JSON_RECORDS)] and stored[1] == stored[len(JSON_RECORDS) + 1]
    assert stored[7] == stored[len(JSON_RECORDS) + 3]  # 2**53 + 1 sent as a JSON integer and as a CSV cell
    found = sqlite_api.client.get("/v1/audit", params={"input_digest": expected[2]}, headers=sqlite_api.h())
    assert found.status_code == 200 and len(found.json()["items"]) == 5  # 3 JSON + 2 CSV rows of that record


def test_a_digest_that_cannot_be_one_is_refused_and_upper_case_hex_finds_it(sqlite_api, doc) -> None:
    """`?input_digest=abc` answered an empty page (no decision has it, so a typo read as "not audited")."""
    v = sqlite_api.import_model(doc)
    r = sqlite_api.client.post(
        f"/v1/models/{v['id']}/predict", json={"records": [JSON_RECORDS[0]]}, headers=sqlite_api.h()
    )
    assert r.status_code == 200, r.text
    for bad in ("abc", "g" * 64, "a" * 63):
        r = sqlite_api.client.get("/v1/audit", params={"input_digest": bad}, headers=sqlite_api.h())
        assert r.status_code == 422 and "input_digest" in r.text, r.text
    digest = documented_digest(JSON_RECORDS[0], from_json=True)
    r = sqlite_api.client.get("/v1/audit", params={"input_digest": digest.upper()}, headers=sqlite_api.h())
    assert r.status_code == 200 and [i["input_digest"] for i in r.json()["items"]] == [digest], r.text
