"""Rows of an evaluation file that the version was trained on: found by value (a subset of the training file,
re-ordered, with columns added or numbers written otherwise), never by a label or feature that differs; and
through the API, on both backends, for a version trained by the job runner."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from app.services.csvdata import parse_csv
from app.services.training_overlap import (
    NO_TRAINING_FILE,
    TRAINING_DATASET_DELETED,
    TRAINING_FILE_UNREADABLE,
    NoTrainingFile,
    TrainingFile,
    training_overlap,
)
from models.rulelist import RuleList
from tests.app.governance_helpers import csv_bytes, evaluate, labelled_rows, upload
from tests.conftest import make_api, rule_list_doc
from tests.worker.test_job_runner import CSV as TOY_CSV
from tests.worker.test_job_runner import make_job, trainer
from worker.evaluations import run_evaluation
from worker.tasks import run_job

TRAIN = labelled_rows(200, seed=11)
RL = RuleList.from_dict(rule_list_doc())


def _overlap(rows: list[list[Any]], header: list[str] | None = None, target: str = "risk") -> dict[str, Any]:
    table = parse_csv(csv_bytes(rows, header) if header else csv_bytes(rows))
    return training_overlap(RL, table, target, TrainingFile("ds_train", csv_bytes(TRAIN), "risk"))


def _repeated(rows: list[list[Any]]) -> int:
    """Rows equal to another row on the model's features and the label, counted here apart from the service."""
    counts = Counter((float(r[0]), float(r[1]), r[2], r[4]) for r in rows)
    return sum(c for c in counts.values() if c > 1)


def test_a_subset_of_the_training_file_is_found_row_by_row() -> None:
    out = _overlap(TRAIN[:50])
    assert out == {
        "training_dataset_id": "ds_train",
        "rows": 50,
        "scored_rows": 50,
        "training_rows": 200,
        "training_repeated_rows": _repeated(TRAIN),
        "unchecked_reason": None,
    }


def test_new_rows_and_rows_that_differ_in_a_feature_or_the_label_are_not_counted() -> None:
    fresh = [[19, 150 + i, "no", "north", "low"] for i in range(30)]  # ages and incomes training never had
    flipped = [[*r[:4], "low" if r[4] == "high" else "high"] for r in TRAIN[:10]]
    nudged = [[r[0], r[1] + 0.5, *r[2:]] for r in TRAIN[10:20]]
    assert _overlap(fresh + flipped + nudged)["rows"] == 0
    assert _overlap(fresh + TRAIN[:7])["rows"] == 7


def test_values_python_hashes_alike_are_told_apart_and_zero_is_zero() -> None:
    """hash(-1.0) == hash(-2.0) in Python: a sentinel -1 and -2 are different rows; -0.0 and 0.0 decide alike."""
    train = TrainingFile("ds_train", csv_bytes([[-1, 0, "yes", "n", "low"], [5, -1, "no", "n", "high"]]), "risk")
    table = parse_csv(
        csv_bytes([[-2, 0, "yes", "n", "low"], [5, -2, "no", "n", "high"], [-1, "-0.0", "yes", "n", "low"]])
    )
    assert training_overlap(RL, table, "risk", train)["rows"] == 1


def test_the_chance_level_predicts_how_many_new_rows_equal_training_rows() -> None:
    """Two files drawn apart from one source, with few distinct values: many rows are equal by chance, about as
    many as the training file's own repeated rows say."""
    train_rows, new_rows = labelled_rows(3000, seed=1), labelled_rows(1000, seed=2)
    table = parse_csv(csv_bytes(new_rows))
    out = training_overlap(RL, table, "risk", TrainingFile("ds_train", csv_bytes(train_rows), "risk"))
    p = out["training_repeated_rows"] / out["training_rows"]
    assert out["training_repeated_rows"] == _repeated(train_rows) and 0.05 < p < 0.95
    assert abs(out["rows"] - 1000 * p) <= 4 * math.sqrt(1000 * p * (1 - p)), (out, p)


def test_rows_match_as_the_model_reads_them_whatever_the_layout() -> None:
    """Columns re-ordered, a column the model does not read changed, another added, numbers written as 61.0,
    a label column of another name: the same decision inputs and label are the same row."""
    header = ["note", "label", "smoker", "income", "age", "region"]
    rows = [[f"n{i}", r[4], r[2], f"{float(r[1]):.1f}", f"{float(r[0]):.1f}", "west"] for i, r in enumerate(TRAIN[:25])]
    assert _overlap(rows, header, target="label")["rows"] == 25


def test_missing_values_match_missing_values_and_unlabelled_rows_never_count() -> None:
    train = [[None, 40, None, "north", "low"], [30, 40, "yes", "north", None]]
    data = TrainingFile("ds_train", csv_bytes(train), "risk")
    table = parse_csv(csv_bytes([[None, 40, None, "south", "low"], [30, 40, "yes", "north", None]]))
    out = training_overlap(RL, table, "risk", data)
    assert (out["rows"], out["training_rows"]) == (1, 1)
    unscored = parse_csv(csv_bytes([[None, 40, None, "south", "medium"]]))  # not a class: not scored, not counted
    assert training_overlap(RL, unscored, "risk", data)["rows"] == 0
    assert training_overlap(RL, unscored, "risk", data)["scored_rows"] == 0


def test_without_a_training_file_the_block_says_why() -> None:
    table = parse_csv(csv_bytes(TRAIN[:5]))
    assert training_overlap(RL, table, "risk", NoTrainingFile(None, NO_TRAINING_FILE)) == {
        "training_dataset_id": None,
        "rows": None,
        "scored_rows": None,
        "training_rows": None,
        "training_repeated_rows": None,
        "unchecked_reason": NO_TRAINING_FILE,
    }
    no_label = TrainingFile("ds_train", csv_bytes(TRAIN), "outcome")  # provenance names a column it lacks
    assert training_overlap(RL, table, "risk", no_label)["unchecked_reason"] == TRAINING_FILE_UNREADABLE
    bad = TrainingFile("ds_train", b"age,income,smoker,risk\nold,1,yes,low\n", "risk")
    assert training_overlap(RL, table, "risk", bad)["unchecked_reason"] == TRAINING_FILE_UNREADABLE
    commas = TrainingFile("ds_train", b"age;income;smoker;risk\n1,5;1.234,5;yes;low\n1.5;2;no;high\n", "risk")
    assert training_overlap(RL, table, "risk", commas)["unchecked_reason"] == TRAINING_FILE_UNREADABLE


# --- through the API: a version trained by the job runner on TOY_CSV (x, color, target; 60 rows) -------------

TOY_ROWS = [line.split(",") for line in TOY_CSV.decode().splitlines()[1:]]


def _toy(rows: list[list[str]], header: str = "x,color,target") -> bytes:
    return (header + "\n" + "".join(",".join(r) + "\n" for r in rows)).encode()


def _trained(api: Any) -> str:
    jid = make_job(api)
    st = api.app.state.service
    assert run_job(st.db, st.settings, jid, trainer=trainer()) == "succeeded"
    return str(api.client.get(f"/v1/jobs/{jid}", headers=api.h()).json()["model_version_id"])


def test_an_evaluation_on_rows_cut_from_the_training_file_says_how_many(api) -> None:
    version = _trained(api)
    part = upload(api, _toy(TOY_ROWS[:20] + [[str(100 + i), "red", "1"] for i in range(5)]), name="part.csv")
    ev = evaluate(api, version, dataset_id=part["id"]).json()
    trained_on = api.client.get(f"/v1/models/{version}", headers=api.h()).json()["provenance"]["dataset_id"]
    assert ev["training_overlap"] == {
        "training_dataset_id": trained_on,
        "rows": 20,
        "scored_rows": 25,
        "training_rows": 60,
        "training_repeated_rows": 0,
        "unchecked_reason": None,
    }
    assert ev["n_rows"] == 25
    listed = api.client.get(f"/v1/models/{version}/evaluations", headers=api.h()).json()["items"]
    assert listed[0]["training_overlap"]["rows"] == 20
    # once the training file is deleted, a new evaluation says it could not check; the stored one keeps its count
    assert api.client.delete(f"/v1/datasets/{trained_on}", headers=api.h()).status_code == 204
    again = evaluate(api, version, dataset_id=part["id"]).json()["training_overlap"]
    assert again == {
        "training_dataset_id": trained_on,
        "rows": None,
        "scored_rows": None,
        "training_rows": None,
        "training_repeated_rows": None,
        "unchecked_reason": TRAINING_DATASET_DELETED,
    }
    kept = api.client.get(f"/v1/evaluations/{ev['id']}", headers=api.h()).json()["training_overlap"]
    assert kept["rows"] == 20


def test_an_imported_version_has_no_training_file_to_check(api, doc) -> None:
    v = api.import_model(doc)
    ds = upload(api, csv_bytes(labelled_rows(20)))
    ev = evaluate(api, v["id"], dataset_id=ds["id"]).json()
    assert ev["training_overlap"]["unchecked_reason"] == NO_TRAINING_FILE and ev["training_overlap"]["rows"] is None


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def test_a_background_evaluation_checks_the_training_file_too(backend, request, tmp_path) -> None:
    pg_url = request.getfixturevalue("pg_database") if backend == "postgresql" else None
    gen = make_api(tmp_path, backend, pg_url, evaluation_sync_max_rows=0)
    api = next(gen)
    try:
        version = _trained(api)
        part = upload(api, _toy(TOY_ROWS[30:42]), name="part.csv")
        r = evaluate(api, version, dataset_id=part["id"])
        assert r.status_code == 202, r.text
        st = api.app.state.service
        assert run_evaluation(st.db, st.settings, r.json()["id"], worker="w") == "succeeded"
        ev = api.client.get(f"/v1/evaluations/{r.json()['id']}", headers=api.h()).json()
        assert (ev["training_overlap"]["rows"], ev["training_overlap"]["training_rows"]) == (12, 60)
    finally:
        gen.close()


def test_a_comparison_names_each_versions_rows_and_reads_no_training_file_over_the_request_limit(
    tmp_path, request
) -> None:
    """Two versions trained on the toy file, compared on rows cut from it: each side counts them; with a request
    limit under the training file's rows, the comparison answers without reading it and says so."""
    for limit, expected in ((1000, {"rows": 20, "unchecked_reason": None}), (30, {"rows": None})):
        gen = make_api(tmp_path / str(limit), "sqlite", evaluation_sync_max_rows=limit)
        api = next(gen)
        try:
            first, second = _trained(api), _trained(api)
            part = upload(api, _toy(TOY_ROWS[:20]), name="part.csv")
            r = api.client.get(
                f"/v1/models/{first}/compare", params={"other": second, "dataset_id": part["id"]}, headers=api.h()
            )
            assert r.status_code == 200, r.text
            sides = r.json()["dataset"]["training_overlap"]
            for side in ("base", "other"):
                assert {k: sides[side][k] for k in expected} == expected, (limit, sides)
            if limit == 30:
                assert sides["base"]["unchecked_reason"] == "training_file_too_large"
                # an evaluation of that version on the 20-row file goes to the background: the 60-row training
                # file is more than a request reads
                ev = evaluate(api, first, dataset_id=part["id"])
                assert ev.status_code == 202 and ev.json()["state"] == "queued", ev.text
            unlabelled = upload(api, _toy([r[:2] for r in TOY_ROWS[:5]], header="x,color"), name="unlabelled.csv")
            r = api.client.get(
                f"/v1/models/{first}/compare", params={"other": second, "dataset_id": unlabelled["id"]}, headers=api.h()
            )
            assert r.status_code == 200 and r.json()["dataset"]["training_overlap"] is None, r.text  # no label
        finally:
            gen.close()


def test_progress_reaches_one_only_after_the_training_file_is_read(monkeypatch) -> None:
    """A background evaluation showed 100 % while its training file was still being read."""
    from app.services import evaluations

    seen: list[float] = []
    real = evaluations.training_overlap

    def recording(*args: Any) -> dict[str, Any]:
        seen.append(-1.0)  # where in the progress reports the training file is read
        return real(*args)

    monkeypatch.setattr(evaluations, "training_overlap", recording)
    data = TrainingFile("ds_train", csv_bytes(TRAIN), "risk")
    evaluations.score_file(RL, csv_bytes(TRAIN[:30]), "risk", None, data, seen.append)
    at = seen.index(-1.0)
    assert seen[at + 1 :] == [1.0] and 0 < max(seen[:at]) < 1, seen


def test_an_evaluation_stored_before_the_chance_level_was_kept_still_reads(api, doc) -> None:
    """Its block lacks training_repeated_rows and scored_rows: read as null, not a 500."""
    from app.tables import Evaluation

    v = api.import_model(doc)
    ds = upload(api, csv_bytes(labelled_rows(20)))
    ev = evaluate(api, v["id"], dataset_id=ds["id"]).json()
    old = {"training_dataset_id": "ds_x", "rows": 3, "training_rows": 9, "unchecked_reason": None}
    with api.app.state.service.db.sessionmaker() as s:
        row = s.get(Evaluation, ev["id"])
        row.result = {**row.result, "training_overlap": old}
        s.commit()
    for url in (f"/v1/evaluations/{ev['id']}", f"/v1/models/{v['id']}/evaluations"):
        r = api.client.get(url, headers=api.h())
        assert r.status_code == 200, r.text
    got = api.client.get(f"/v1/evaluations/{ev['id']}", headers=api.h()).json()["training_overlap"]
    assert got == {**old, "scored_rows": None, "training_repeated_rows": None}


def test_a_level_in_another_unicode_form_is_the_training_rows_value() -> None:
    """An evaluation row `Zürich` decomposed (NFD) equals the training row `Zürich` composed, as the list decides
    both alike: it was counted as a new row."""
    import unicodedata

    from app.services.csvdata import categorical_names, parse_csv
    from app.services.training_overlap import TrainingFile, training_overlap
    from models.rulelist import RuleList
    from tests.app.governance_helpers import ZURICH as composed
    from tests.app.governance_helpers import city_rule_list

    rl = RuleList.from_dict(city_rule_list("y", ["no", "yes"]))
    training = f"city,y\n{composed},yes\nBern,no\n".encode()
    scored = f"city,y\n{unicodedata.normalize('NFD', composed)},yes\nBern,no\n".encode()
    table = parse_csv(scored, keep_text=categorical_names(rl))
    out = training_overlap(rl, table, "y", TrainingFile("ds_1", training, "y"))
    assert out["rows"] == 2 and out["scored_rows"] == 2, out


def test_deleting_a_training_file_is_an_event_in_its_models_chain(api) -> None:
    """A security probe: deleting the dataset a version (even the one in production) was trained on left only a log
    line on the operator's side: a reviewer with a read key could not see who removed that evidence. It is now a
    `training_file_deleted` event in the model's chain, by the deleting key, naming the file; other deletions add
    nothing."""
    version = _trained(api)
    mv = api.client.get(f"/v1/models/{version}", headers=api.h()).json()
    ds = api.client.get(f"/v1/datasets/{mv['provenance']['dataset_id']}", headers=api.h()).json()
    unrelated = upload(api, _toy(TOY_ROWS[:10]), name="other.csv")
    events = f"/v1/registered-models/{mv['name']}/events"
    before = api.client.get(events, headers=api.h()).json()["total"]
    assert api.client.delete(f"/v1/datasets/{unrelated['id']}", headers=api.h()).status_code == 204
    assert api.client.get(events, headers=api.h()).json()["total"] == before
    assert api.client.delete(f"/v1/datasets/{ds['id']}", headers=api.h()).status_code == 204
    page = api.client.get(events, headers=api.h()).json()
    newest = page["items"][0]
    key_id = api.client.get("/v1/keys", headers=api.h()).json()["items"][0]["id"]
    assert page["total"] == before + 1 and newest["action"] == "training_file_deleted", newest
    assert (newest["to_version"], newest["api_key_id"]) == (mv["version"], key_id)
    assert ds["id"] in newest["note"] and ds["sha256"] in newest["note"], newest
    check = api.client.get("/v1/audit/verify", headers=api.h()).json()
    assert check["intact"] and check["registry_events"]["intact"], check
