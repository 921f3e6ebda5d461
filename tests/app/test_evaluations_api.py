"""Evaluations through the API on SQLite and PostgreSQL: metrics against scikit-learn's on the API's own
predictions, counts that add up, what is stored, the bad-input catalogue (nothing stored) and tenants."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from sklearn.metrics import accuracy_score, brier_score_loss, confusion_matrix, f1_score, roc_auc_score

from tests.app.governance_helpers import HEADER, csv_bytes, evaluate, labelled_rows, predict, records_of, upload


def _scored_rows() -> list[list[Any]]:
    rows = labelled_rows(240, seed=3)
    rows[0][4] = None  # missing target: excluded, counted
    rows[1][4] = "medium"  # a class the model never saw: excluded, counted
    rows[2][2] = "sometimes"  # an unseen category: scored, reported
    rows[3][0] = None  # a missing number: scored at the fill value
    return rows


def test_metrics_match_scikit_learn_on_the_apis_predictions(api, doc) -> None:
    v = api.import_model(doc)
    rows = _scored_rows()
    ds = upload(api, csv_bytes(rows))
    r = evaluate(api, v["id"], dataset_id=ds["id"], slice_by="region")
    assert r.status_code == 201, r.text
    ev = r.json()
    assert ev["state"] == "succeeded" and ev["progress"] == 1.0 and ev["error"] is None
    assert ev["model_version"] == {"id": v["id"], "name": "risk", "version": 1}
    assert ev["target"] == "risk"  # the model's training target by default
    assert ev["n_rows_in_file"] == 240 and ev["n_rows"] == 238
    assert ev["excluded"] == {"missing_target": 1, "unseen_class": 1, "unseen_class_values": {"medium": 1}}
    assert ev["unseen_categories"] == {"smoker": {"sometimes": 1}}

    scored = rows[2:]
    preds = predict(api, v["id"], records_of(scored), explain="none")
    y_true = [r[4] for r in scored]
    y_pred = [p["prediction"] for p in preds]
    p_high = [p["probabilities"]["high"] for p in preds]
    m = ev["metrics"]
    assert m["accuracy"] == pytest.approx(accuracy_score(y_true, y_pred))
    assert m["f1_weighted"] == pytest.approx(f1_score(y_true, y_pred, average="weighted"))
    assert m["f1_macro"] == pytest.approx(f1_score(y_true, y_pred, average="macro"))
    assert m["roc_auc"] == pytest.approx(roc_auc_score([t == "high" for t in y_true], p_high))
    assert m["brier"] == pytest.approx(brier_score_loss([t == "high" for t in y_true], p_high))
    assert [c["class"] for c in m["per_class"]] == ["low", "high"]
    cm = confusion_matrix(y_true, y_pred, labels=["low", "high"]).tolist()
    assert ev["confusion_matrix"] == {"labels": ["low", "high"], "matrix": cm}

    # per rule: the API's own deciding rules, counted; they add up to n_rows
    decided = Counter(p["rule_id"] for p in preds)
    assert [r["rule_id"] for r in ev["rules"]] == [1, 2, 0]
    assert {r["rule_id"]: r["n"] for r in ev["rules"]} == {j: decided.get(j, 0) for j in (1, 2, 0)}
    assert sum(r["n"] for r in ev["rules"]) == ev["n_rows"] == sum(map(sum, cm))
    for rule in ev["rules"]:
        hits = [t == p for t, p, q in zip(y_true, y_pred, preds, strict=True) if q["rule_id"] == rule["rule_id"]]
        assert rule["accuracy"] == (pytest.approx(sum(hits) / len(hits)) if hits else None)
    assert [r["training_support"] for r in ev["rules"]] == [43, 30, 150]
    assert sum(g["n_rows"] for g in ev["slices"]["groups"]) == ev["n_rows"]
    assert all(g["pooled"] is False for g in ev["slices"]["groups"])  # the schema passes the flag through
    assert sum(b["count"] for b in ev["calibration"]["bins"]) == ev["n_rows"]

    # stored: the same answer by id, and a summary in the version's list
    assert api.client.get(f"/v1/evaluations/{ev['id']}", headers=api.h()).json() == ev
    listed = api.client.get("/v1/models/risk@latest/evaluations", headers=api.h()).json()
    assert listed["total"] == 1 and listed["items"][0]["id"] == ev["id"]
    assert listed["items"][0]["metrics"] == ev["metrics"]
    assert not {"rules", "slices", "calibration"} & set(listed["items"][0])
    assert api.count("evaluations") == 1


def test_newest_first_and_paged(api, doc) -> None:
    v = api.import_model(doc)
    ds = upload(api, csv_bytes(labelled_rows(30)))
    ids = [evaluate(api, v["id"], dataset_id=ds["id"]).json()["id"] for _ in range(3)]
    page = api.client.get(f"/v1/models/{v['id']}/evaluations", params={"limit": 2}, headers=api.h()).json()
    assert page["total"] == 3 and [e["id"] for e in page["items"]] == ids[::-1][:2]


def _bad_cases(api) -> list[tuple[dict[str, Any], int, str, str]]:
    """(request body, status, code, field) for each way a dataset can be wrong."""
    rows = labelled_rows(20)
    no_target = upload(api, csv_bytes([r[:4] for r in rows], HEADER[:4]))
    no_income = upload(api, csv_bytes([[r[0], r[2], r[3], r[4]] for r in rows], ["age", "smoker", "region", "risk"]))
    text_age = upload(api, csv_bytes([["old", *r[1:]] if i == 4 else r for i, r in enumerate(rows)]))
    unseen = upload(api, csv_bytes([[*r[:4], "medium"] for r in rows]))
    good = upload(api, csv_bytes(rows))
    return [
        ({"dataset_id": no_target["id"]}, 422, "target_not_found", "target"),
        ({"dataset_id": good["id"], "target": "nope"}, 422, "target_not_found", "target"),
        ({"dataset_id": no_income["id"]}, 422, "missing_columns", "dataset_id"),
        ({"dataset_id": good["id"], "slice_by": "nope"}, 422, "column_not_found", "slice_by"),
        ({"dataset_id": text_age["id"]}, 422, "invalid_values", "line 6.age"),
        ({"dataset_id": unseen["id"]}, 422, "no_rows_to_score", "target"),
        ({"dataset_id": "ds_nope"}, 404, "not_found", ""),
        ({"dataset_id": good["id"], "extra": 1}, 422, "invalid_input", "extra"),
        ({"dataset_id": good["id"], "target": ""}, 422, "invalid_input", "target"),
    ]


def test_bad_input_is_a_clear_4xx_and_stores_nothing(api, doc) -> None:
    v = api.import_model(doc)
    for body, status, code, field in _bad_cases(api):
        r = evaluate(api, v["id"], **body)
        assert r.status_code == status, (body, r.text)
        err = r.json()["error"]
        assert err["code"] == code, (body, err)
        if field:
            assert err["details"][0]["field"] == field, (body, err)
    assert evaluate(api, "risk@nope", dataset_id="ds_x").status_code == 404
    assert api.count("evaluations") == 0
    # an empty file never becomes a dataset: the upload refuses it, so no evaluation can reach it
    n = api.count("datasets")
    for data in (b"", b"age,income,smoker,risk\n"):
        r = api.client.post("/v1/datasets", files={"file": ("e.csv", data, "text/csv")}, headers=api.h())
        assert r.status_code == 422 and r.json()["error"]["code"] in ("csv_empty", "csv_no_rows")
    assert api.count("datasets") == n


def test_background_path_refuses_bad_input_before_queueing(tmp_path, doc) -> None:
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", evaluation_sync_max_rows=0)
    api = next(gen)
    try:
        v = api.import_model(doc)
        rows = labelled_rows(20)
        for body, status, code, _ in _bad_cases(api)[:4]:
            r = evaluate(api, v["id"], **body)
            assert (r.status_code, r.json()["error"]["code"]) == (status, code)
        assert api.count("evaluations") == 0 and api.queue.evaluations == []
        ds = upload(api, csv_bytes(rows))
        api.queue.fail = True  # the broker refuses: 503 naming it, nothing left behind
        r = evaluate(api, v["id"], dataset_id=ds["id"])
        assert r.status_code == 503 and r.json()["error"]["code"] == "broker_unavailable"
        assert api.count("evaluations") == 0
        api.queue.fail = False
        r = evaluate(api, v["id"], dataset_id=ds["id"])
        assert r.status_code == 202 and r.json()["state"] == "queued" and r.json()["metrics"] is None
        assert api.queue.evaluations == [r.json()["id"]]
    finally:
        gen.close()


def test_other_tenants_get_404(api, doc) -> None:
    v = api.import_model(doc)
    ds = upload(api, csv_bytes(labelled_rows(20)))
    ev = evaluate(api, v["id"], dataset_id=ds["id"]).json()
    vb = api.import_model(doc, key=api.key_b)
    ds_b = upload(api, csv_bytes(labelled_rows(20)), key=api.key_b)
    assert api.client.get(f"/v1/evaluations/{ev['id']}", headers=api.h(api.key_b)).status_code == 404
    assert api.client.get(f"/v1/models/{v['id']}/evaluations", headers=api.h(api.key_b)).status_code == 404
    assert evaluate(api, v["id"], key=api.key_b, dataset_id=ds_b["id"]).status_code == 404
    assert evaluate(api, vb["id"], key=api.key_b, dataset_id=ds["id"]).status_code == 404  # a's dataset
    own = api.client.get(f"/v1/models/{vb['id']}/evaluations", headers=api.h(api.key_b)).json()
    assert own["total"] == 0
    assert api.count("evaluations") == 1


def test_an_evaluation_scored_in_the_request_is_created_before_it_finished(api, doc) -> None:
    """`created_at` is when the request made it, not when the row was flushed after scoring."""
    v = api.import_model(doc)
    ds = upload(api, csv_bytes(labelled_rows(240, seed=5)))
    ev = evaluate(api, v["id"], dataset_id=ds["id"]).json()
    assert ev["state"] == "succeeded"
    assert ev["created_at"] <= ev["finished_at"], (ev["created_at"], ev["finished_at"])


def test_an_evaluation_keeps_the_scored_files_hash_after_the_dataset_is_deleted(api, doc) -> None:
    """Whether an evaluation was on the training file was unknown once its dataset was deleted (the console
    then showed its per-rule accuracy as held-out, 'whether the file was used in training is unknown')."""
    v = api.import_model(doc)
    ds = upload(api, csv_bytes(labelled_rows(240, seed=6)))
    ev = evaluate(api, v["id"], dataset_id=ds["id"]).json()
    assert ev["dataset_sha256"] == ds["sha256"] and len(ds["sha256"]) == 64
    assert api.client.delete(f"/v1/datasets/{ds['id']}", headers=api.h()).status_code == 204
    again = api.client.get(f"/v1/evaluations/{ev['id']}", headers=api.h()).json()
    assert again["dataset_sha256"] == ds["sha256"]
    listed = api.client.get("/v1/models/risk@latest/evaluations", headers=api.h()).json()
    assert listed["items"][0]["dataset_sha256"] == ds["sha256"]


def test_a_target_that_is_not_the_label_is_refused_naming_target(api, doc) -> None:
    """`target` naming one of the model's input features (heart's `att_1`) answered 201 "succeeded", scoring the
    8 of 270 rows whose value happened to read as a class, with an accuracy and ROC-AUC about nothing. A feature
    is never the label (422 `target_is_a_feature`), and a column whose values are mostly not the model's
    classes is refused too (422 `too_few_rows_to_score`); both name `target`, nothing is stored, on the
    background path as in the request. A label column under another name than at training is scored."""
    v = api.import_model(doc)
    rows = labelled_rows(40, seed=7)
    mostly_other = [[*r, r[4] if i < 5 else "north"] for i, r in enumerate(rows)]  # 5 of 40 are classes
    ds = upload(api, csv_bytes(mostly_other, [*HEADER, "label"]))
    for body, code, words in (
        ({"target": "age"}, "target_is_a_feature", "input features"),
        ({"target": "smoker"}, "target_is_a_feature", "input features"),
        ({"target": "label"}, "too_few_rows_to_score", "only 5 of the 40 rows"),
    ):
        r = evaluate(api, v["id"], dataset_id=ds["id"], **body)
        assert r.status_code == 422, (body, r.text)
        err = r.json()["error"]
        assert err["code"] == code and err["details"][0]["field"] == "target", (body, err)
        assert words in err["message"], err
    assert api.count("evaluations") == 0

    renamed = upload(api, csv_bytes([[*r, r[4]] for r in rows], [*HEADER, "label"]))
    r = evaluate(api, v["id"], dataset_id=renamed["id"], target="label")
    assert r.status_code == 201 and r.json()["n_rows"] == 40 and r.json()["target"] == "label", r.text
    half = upload(api, csv_bytes([[*r, r[4] if i % 2 else "medium"] for i, r in enumerate(rows)], [*HEADER, "y"]))
    r = evaluate(api, v["id"], dataset_id=half["id"], target="y")  # half the rows are classes: scored
    assert r.status_code == 201 and r.json()["excluded"]["unseen_class"] == 20, r.text


def test_the_background_path_refuses_a_feature_as_target_before_queueing(tmp_path, doc) -> None:
    from tests.conftest import make_api

    gen = make_api(tmp_path, "sqlite", evaluation_sync_max_rows=0)
    api = next(gen)
    try:
        v = api.import_model(doc)
        ds = upload(api, csv_bytes(labelled_rows(20)))
        r = evaluate(api, v["id"], dataset_id=ds["id"], target="income")
        assert r.status_code == 422 and r.json()["error"]["code"] == "target_is_a_feature", r.text
        assert api.count("evaluations") == 0 and api.queue.evaluations == []
    finally:
        gen.close()


def test_a_dataset_deleted_between_its_row_and_its_file_is_a_404(api, doc, monkeypatch) -> None:
    """An evaluation, a comparison and a preview read the dataset's row, then its file: a DELETE committing
    between the two (PostgreSQL's read committed) made the file read a KeyError, a 500. Here the file goes
    right after the row is read, as that DELETE would take it."""
    from sqlalchemy import delete

    from app.services import datasets
    from app.tables import Blob

    v = api.import_model(doc)
    rows = labelled_rows(40, seed=5)
    real = datasets.get_dataset

    def row_then_file_gone(session: Any, *args: Any, **kwargs: Any) -> Any:
        ds = real(session, *args, **kwargs)
        session.execute(delete(Blob).where(Blob.key == ds.blob_key))
        return ds

    monkeypatch.setattr(datasets, "get_dataset", row_then_file_gone)
    ds_e = upload(api, csv_bytes(rows))
    answers = [evaluate(api, v["id"], dataset_id=ds_e["id"])]
    ds_c, ds_p = upload(api, csv_bytes(rows)), upload(api, csv_bytes(rows))
    answers.append(
        api.client.get(
            f"/v1/models/{v['id']}/compare", params={"other": v["id"], "dataset_id": ds_c["id"]}, headers=api.h()
        )
    )
    answers.append(api.client.get(f"/v1/datasets/{ds_p['id']}/preview", headers=api.h()))
    for r in answers:
        assert r.status_code == 404, r.text
        assert "deleted meanwhile" in r.json()["error"]["message"], r.text
    assert api.count("evaluations") == 0
