"""Randomly broken rule-list documents, records and CSVs get 4xx answers, never a 500."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

from fastapi.testclient import TestClient

from tests.conftest import rule_list_doc

VALUES: list[Any] = [None, 1, -1.5, "x", "", [], {}, [1], {"a": 1}, True, "between", "in", ["a"], [None], 10**30]


def _paths(o: Any, p: tuple = ()) -> Iterator[tuple]:
    yield p
    if isinstance(o, dict):
        for k, v in o.items():
            yield from _paths(v, (*p, k))
    elif isinstance(o, list):
        for i, v in enumerate(o):
            yield from _paths(v, (*p, i))


def test_mutated_documents_and_records(sqlite_api) -> None:
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    h = {**sqlite_api.h(), "content-type": "application/json"}
    rng = random.Random(7)
    base = rule_list_doc()
    paths = [p for p in _paths(base) if p]
    statuses: dict[int, int] = {}
    good = sqlite_api.import_model(base)["id"]
    for _ in range(300):
        d = copy.deepcopy(base)
        p = rng.choice(paths)
        o = d
        for k in p[:-1]:
            o = o[k]
        if rng.random() < 0.2 and isinstance(o, dict):
            del o[p[-1]]
        else:
            o[p[-1]] = rng.choice(VALUES)
        r = client.post("/v1/models", content=json.dumps({"name": "f", "rule_list": d}), headers=h)
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code < 500, (p, r.text)
        rec = {"age": rng.choice(VALUES), "income": rng.choice(VALUES), "smoker": rng.choice(VALUES)}
        if rng.random() < 0.3:
            rec[rng.choice(["x", "age"])] = rng.choice(VALUES)
        r = client.post(f"/v1/models/{good}/predict", content=json.dumps({"records": [rec]}), headers=h)
        assert r.status_code in (200, 422), (rec, r.text)
    assert statuses.get(201, 0) > 0 and statuses.get(422, 0) > 0


def test_random_csv_bytes(sqlite_api) -> None:
    client = TestClient(sqlite_api.app, raise_server_exceptions=False)
    rng = random.Random(3)
    alphabet = b'ab,;\n\r"\x00\xff\xe9 1.5NA?'
    for _ in range(150):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        r = client.post("/v1/datasets", files={"file": ("r.csv", data, "text/csv")}, headers=sqlite_api.h())
        assert r.status_code in (201, 413, 422), (data, r.text)
