"""Background evaluations on a real database: the worker's run (claim, progress, store), idempotency,
failures with a readable reason, a silent worker's evaluation taken over, and the reaper."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from app.services import evaluation_runs as runs
from app.services.evaluations import score_file
from app.services.training_overlap import NO_TRAINING_FILE, NoTrainingFile
from app.tables import Evaluation, utcnow
from models.rulelist import RuleList
from tests.app.governance_helpers import csv_bytes, evaluate, labelled_rows, upload
from tests.conftest import make_api
from worker.evaluations import EVALUATE_TASK, reap_evaluations, run_evaluation


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.integration)])
def bg_api(request: pytest.FixtureRequest, tmp_path):
    """The API with every evaluation sent to the background (sync threshold 0)."""
    pg_url = request.getfixturevalue("pg_database") if request.param == "postgresql" else None
    yield from make_api(tmp_path, request.param, pg_url, evaluation_sync_max_rows=0)


def _queued(api, doc, rows: list[list[Any]] | None = None, **body: Any) -> str:
    v = api.import_model(doc)
    ds = upload(api, csv_bytes(rows or labelled_rows(120, seed=5)))
    r = evaluate(api, v["id"], dataset_id=ds["id"], **body)
    assert r.status_code == 202, r.text
    return r.json()["id"]  # type: ignore[no-any-return]


def _row(api, ev_id: str) -> Evaluation:
    with api.app.state.service.db.sessionmaker() as s:
        row = s.get(Evaluation, ev_id)
        assert row is not None
        return row


def test_worker_scores_a_queued_evaluation_like_the_request_does(bg_api, doc) -> None:
    api = bg_api
    ev_id = _queued(api, doc, slice_by="region")
    st = api.app.state.service
    assert run_evaluation(st.db, st.settings, ev_id, worker="w") == "succeeded"
    ev = api.client.get(f"/v1/evaluations/{ev_id}", headers=api.h()).json()
    assert ev["state"] == "succeeded" and ev["progress"] == 1.0 and ev["finished_at"]
    assert ev["n_rows"] == 120 and sum(r["n"] for r in ev["rules"]) == 120 and ev["slices"]["column"] == "region"
    # the blocks the request path would have stored for the same file
    data, imported = csv_bytes(labelled_rows(120, seed=5)), NoTrainingFile(None, NO_TRAINING_FILE)
    direct = score_file(RuleList.from_dict(doc), data, "risk", "region", imported)
    keys = ("n_rows", "excluded", "metrics", "confusion_matrix", "calibration", "rules", "slices", "training_overlap")
    for key in keys:
        assert json.loads(json.dumps(direct[key])) == ev[key], key
    assert _row(api, ev_id).attempts == 1
    # a redelivered message for a finished evaluation does nothing
    assert run_evaluation(st.db, st.settings, ev_id) == "skipped"


def test_input_refused_by_the_scoring_fails_with_its_code(bg_api, doc) -> None:
    api = bg_api
    rows = labelled_rows(20)
    rows[3][0] = "old"  # only the scoring sees it: the profile just calls the column categorical
    ev_id = _queued(api, doc, rows)
    st = api.app.state.service
    assert run_evaluation(st.db, st.settings, ev_id) == "failed"
    ev = api.client.get(f"/v1/evaluations/{ev_id}", headers=api.h()).json()
    assert ev["state"] == "failed" and ev["error_code"] == "invalid_values" and "line 5.age" in ev["error"]
    assert ev["metrics"] is None and ev["rules"] is None


def test_deleted_dataset_fails_readably(bg_api, doc) -> None:
    api = bg_api
    ev_id = _queued(api, doc)
    ds_id = _row(api, ev_id).dataset_id
    assert api.client.delete(f"/v1/datasets/{ds_id}", headers=api.h()).status_code == 204
    st = api.app.state.service
    assert run_evaluation(st.db, st.settings, ev_id) == "failed"
    row = _row(api, ev_id)
    assert row.error_code == "dataset_not_found" and ds_id in (row.error or "")


def test_a_live_worker_keeps_it_a_silent_one_loses_it(bg_api, doc) -> None:
    api = bg_api
    ev_id = _queued(api, doc)
    st = api.app.state.service
    stale = st.settings.stale_after_s
    with st.db.session() as s:
        assert runs.claim(s, ev_id, "w1", stale_after_s=stale)
    with st.db.session() as s:
        assert not runs.claim(s, ev_id, "w2", stale_after_s=stale)  # w1 is alive
        s.get(Evaluation, ev_id).heartbeat_at = utcnow() - timedelta(seconds=stale + 5)
    assert run_evaluation(st.db, st.settings, ev_id, worker="w2") == "succeeded"  # w1 went silent
    with st.db.session() as s:  # w1 wakes up: nothing of its is stored any more
        assert not runs.heartbeat(s, ev_id, "w1", 0.5)
        assert not runs.fail(s, ev_id, "w1", "x", "late")
    row = _row(api, ev_id)
    assert row.state == "succeeded" and row.attempts == 2


class RecordingApp:
    """Stands in for the Celery app: records what the reaper sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def send_task(self, name: str, args: list[str], queue: str) -> None:
        """Record one send."""
        self.sent.append((name, args[0]))


def test_reaper_requeues_resends_then_fails(bg_api, doc) -> None:
    api = bg_api
    ev_id = _queued(api, doc)
    st = api.app.state.service
    app = RecordingApp()

    def age(**fields: Any) -> None:
        with st.db.session() as s:
            row = s.get(Evaluation, ev_id)
            for k, v in fields.items():
                setattr(row, k, v)

    assert reap_evaluations(st.db, st.settings, app) == []  # type: ignore[arg-type]
    age(heartbeat_at=utcnow() - timedelta(seconds=st.settings.resend_queued_after_s + 5))
    acts = reap_evaluations(st.db, st.settings, app)  # type: ignore[arg-type]
    assert [(a.evaluation_id, a.action) for a in acts] == [(ev_id, "resent")]
    for attempt in range(1, st.settings.max_attempts + 1):
        with st.db.session() as s:
            assert runs.claim(s, ev_id, f"w{attempt}", stale_after_s=st.settings.stale_after_s)
        age(heartbeat_at=utcnow() - timedelta(seconds=st.settings.stale_after_s + 5))
        acts = reap_evaluations(st.db, st.settings, app)  # type: ignore[arg-type]
        want = "requeued" if attempt < st.settings.max_attempts else "failed"
        assert [a.action for a in acts] == [want]
    assert app.sent == [(EVALUATE_TASK, ev_id)] * st.settings.max_attempts
    row = _row(api, ev_id)
    assert row.state == "failed" and row.error_code == "worker_lost"


def test_the_evaluation_a_dead_embedded_worker_held_is_requeued_at_once(bg_api, doc) -> None:
    """A review: the start-up sweep of a restarted embedded worker requeued its predecessor's jobs at once and left
    its evaluation `running` (frozen progress) until the heartbeat went stale and a later sweep came, ~2.5 minutes.
    A live worker's evaluation is left alone."""
    from worker.embedded import EMBEDDED_HOLDERS, EMBEDDED_HOST
    from worker.tasks import reap_and_requeue

    api = bg_api
    orphan, alive = _queued(api, doc), _queued(api, doc)
    st = api.app.state.service
    with st.db.session() as s:  # both with a fresh heartbeat; only the first one's holder is provably gone
        assert runs.claim(s, orphan, f"{EMBEDDED_HOST}/123/deadbeef", stale_after_s=st.settings.stale_after_s)
        assert runs.claim(s, alive, "gpu-7/55/cafe", stale_after_s=st.settings.stale_after_s)
    reap_and_requeue(st.db, st.settings, None, dead_worker_prefix=EMBEDDED_HOLDERS)
    assert (_row(api, orphan).state, _row(api, orphan).worker) == ("queued", None)
    assert (_row(api, alive).state, _row(api, alive).worker) == ("running", "gpu-7/55/cafe")


def test_a_clean_stop_puts_its_evaluation_back_without_counting_the_attempt(bg_api, doc) -> None:
    from worker.embedded import EMBEDDED_HOST

    api = bg_api
    ev_id = _queued(api, doc)
    st = api.app.state.service
    with st.db.session() as s:
        assert runs.claim(s, ev_id, f"{EMBEDDED_HOST}/77/aa", stale_after_s=st.settings.stale_after_s)
    with st.db.session() as s:
        assert runs.hand_back(s, f"{EMBEDDED_HOST}/77/") == [ev_id]
    row = _row(api, ev_id)
    assert (row.state, row.worker, row.attempts) == ("queued", None, 0)
    assert run_evaluation(st.db, st.settings, ev_id) == "succeeded"
