"""Shared helpers for the governance API tests: a labelled CSV for the hand-written rule list, uploads, predictions."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.services.csvdata import write_csv

HEADER = ["age", "income", "smoker", "region", "risk"]


def labelled_rows(n: int, seed: int = 0) -> list[list[Any]]:
    """Records of the hand-written rule list's features with a noisy `risk` label and a `region` column."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        age, income = int(rng.integers(20, 81)), int(rng.integers(0, 120))
        smoker = str(rng.choice(["yes", "no"]))
        signal = (age >= 60 and smoker == "yes") or income <= 10
        label = ("high" if signal else "low") if rng.random() < 0.8 else str(rng.choice(["low", "high"]))
        rows.append([age, income, smoker, str(rng.choice(["north", "south", "east"])), label])
    return rows


def csv_bytes(rows: list[list[Any]], header: list[str] = HEADER) -> bytes:
    """Rows as CSV bytes (None as an empty cell)."""
    return write_csv(header, [["" if v is None else v for v in r] for r in rows]).encode()


def upload(api: Any, data: bytes, name: str = "data.csv", key: str | None = None) -> dict[str, Any]:
    """Upload a CSV as a dataset (201 expected)."""
    r = api.client.post("/v1/datasets", files={"file": (name, data, "text/csv")}, headers=api.h(key))
    assert r.status_code == 201, r.text
    return r.json()  # type: ignore[no-any-return]


def records_of(rows: list[list[Any]], header: list[str] = HEADER) -> list[dict[str, Any]]:
    """The model's fields of each row, as JSON records (the label and other columns dropped)."""
    idx = {h: i for i, h in enumerate(header)}
    return [{f: r[idx[f]] for f in ("age", "income", "smoker")} for r in rows]


def predict(api: Any, ref: str, records: list[dict[str, Any]], **body: Any) -> list[dict[str, Any]]:
    """Decisions through the API (200 expected)."""
    r = api.client.post(f"/v1/models/{ref}/predict", json={"records": records, **body}, headers=api.h())
    assert r.status_code == 200, r.text
    return r.json()["predictions"]  # type: ignore[no-any-return]


def evaluate(api: Any, ref: str, key: str | None = None, **body: Any) -> Any:
    """POST an evaluation; the raw response."""
    return api.client.post(f"/v1/models/{ref}/evaluations", json=body, headers=api.h(key))


ZURICH = "Z\u00fcrich"  # a precomposed ü (NFC); its decomposed spelling is u + U+0308


def city_rule_list(target: str = "target", classes: list[Any] | None = None) -> dict[str, Any]:
    """A one-rule list: `city in {Zürich}` (composed) decides the second class, anything else the first."""
    return {
        "format": "neurules.rulelist",
        "version": 1,
        "target": target,
        "classes": classes if classes is not None else [0, 1],
        "features": [{"name": "city", "type": "categorical", "categories": [ZURICH, "Bern"]}],
        "rules": [
            {
                "conditions": [{"feature": "city", "op": "in", "values": [ZURICH]}],
                "class_counts": [1, 9],
                "probabilities": [0.1, 0.9],
            }
        ],
        "default": {"class_counts": [9, 1], "probabilities": [0.9, 0.1]},
    }
