"""What a training run leaves for review: the held-out evaluation per rule in the version's metrics, the
training history, and the version's creation in the registry events."""

from __future__ import annotations

from tests.worker.test_job_runner import make_job, trainer
from worker.tasks import run_job


def test_a_trained_version_carries_its_held_out_evaluation_history_and_event(api) -> None:
    jid = make_job(api, {"epochs": 7})
    st = api.app.state.service
    assert run_job(st.db, st.settings, jid, trainer=trainer()) == "succeeded"
    job = api.client.get(f"/v1/jobs/{jid}", headers=api.h()).json()
    mv = api.client.get(f"/v1/models/{job['model_version_id']}", headers=api.h()).json()
    metrics = mv["metrics"]
    assert {"holdout", "train", "test_size", "n_rules", "rows_without_target_dropped"} <= set(metrics)
    ev = metrics["holdout_evaluation"]
    assert ev["n_rows"] == metrics["holdout"]["n_rows"] == 12
    assert ev["metrics"]["accuracy"] == metrics["holdout"]["accuracy"]
    assert ev["metrics"]["f1_weighted"] == metrics["holdout"]["weighted_f1"]
    assert [r["rule_id"] for r in ev["rules"]] == [1, 0] and sum(r["n"] for r in ev["rules"]) == 12
    assert all(r["accuracy"] == 1.0 for r in ev["rules"] if r["n"])
    # the fake learner reports epochs 1..7; the worker writes epochs 1, 5 and the last (every 5, first, last)
    points = api.client.get(f"/v1/jobs/{jid}/history", headers=api.h()).json()["points"]
    assert [p["epoch"] for p in points] == [1, 5, 7]
    assert [p["loss"] for p in points] == [1.0, 0.2, 1 / 7] and {p["attempt"] for p in points} == {1}
    events = api.client.get(f"/v1/registered-models/{mv['name']}/events", headers=api.h()).json()["items"]
    assert [(e["action"], e["to_version"], e["job_id"], e["api_key_id"]) for e in events] == [
        ("version_created", 1, jid, job["api_key_id"])
    ]
    assert job["api_key_id"] is not None  # the key that submitted the job: who asked for this version


def test_the_holdout_macro_f1_counts_a_class_predicted_but_absent_as_the_evaluation_does() -> None:
    """`metrics.holdout.macro_f1` averaged over the classes in the labels only, `holdout_evaluation`'s
    `f1_macro` over those in the labels or the predictions (as scikit-learn): one version could carry two
    different "macro F1" figures for the same rows."""
    import numpy as np
    from sklearn.metrics import f1_score

    from worker.training import scores

    y_true = np.array(["a", "a", "b", "b"], dtype=object)
    y_pred = np.array(["a", "c", "b", "b"], dtype=object)  # "c": predicted, absent from the labels
    got = scores(y_true, y_pred)
    assert got["macro_f1"] == round(f1_score(y_true, y_pred, average="macro"), 6)
    assert got["weighted_f1"] == round(f1_score(y_true, y_pred, average="weighted"), 6)
