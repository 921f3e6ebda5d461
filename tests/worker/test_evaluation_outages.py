"""Background evaluations under outages, like training jobs: a database blip while one is scored neither fails
it nor stops its heartbeat, its result is stored when the database returns, and a queued evaluation whose
message the broker lost is re-sent within one reaper sweep (not after the 900 s timer)."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from app.db import Database
from app.services import evaluations as evaluation_service
from app.settings import Settings
from app.tables import Evaluation, utcnow
from tests.conftest import make_api
from tests.worker import test_evaluation_runner as runner
from tests.worker.test_evaluation_runner import RecordingApp, _queued, _row
from tests.worker.test_outages import refusing, swap
from worker.celery_app import make_celery
from worker.evaluations import EVALUATE_TASK, run_evaluation
from worker.tasks import TRAIN_TASK, broker_scan_for, reap_and_requeue

bg_api = runner.bg_api  # the API on each backend with every evaluation sent to the background


@pytest.fixture
def sqlite_bg(tmp_path):
    """`bg_api` on SQLite only."""
    yield from make_api(tmp_path, "sqlite", evaluation_sync_max_rows=0)


def _worker_db(api) -> tuple[Database, Settings]:
    """A database of the worker's own (its engine can be swapped) and settings with a fast heartbeat."""
    st = api.app.state.service
    return Database(st.settings.resolved_database_url), st.settings.model_copy(update={"heartbeat_interval_s": 0.05})


def test_a_database_blip_while_scoring_neither_fails_it_nor_stops_its_heartbeat(sqlite_bg, doc, monkeypatch) -> None:
    api = sqlite_bg
    ev_id = _queued(api, doc)
    db, settings = _worker_db(api)
    back: list[Any] = []

    def blipping_score(rule_list: Any, data: bytes, target: str, slice_by: Any, training: Any, progress: Any) -> Any:
        progress(0.1)
        good = swap(db, refusing())  # the database goes away while the file is scored
        time.sleep(0.3)  # heartbeats fail meanwhile
        progress(0.5)  # a progress write finds it away: skipped, the scoring goes on
        swap(db, good)
        back.append(utcnow())
        time.sleep(0.4)  # the heartbeat thread writes again
        return real_score(rule_list, data, target, slice_by, training, progress)

    real_score = evaluation_service.score_file
    monkeypatch.setattr("worker.evaluations.evaluations.score_file", blipping_score)
    assert run_evaluation(db, settings, ev_id, worker="w") == "succeeded"
    row = _row(api, ev_id)
    assert row.state == "succeeded" and row.error is None and row.n_rows == 120
    assert row.heartbeat_at is not None and row.heartbeat_at > back[0]  # beats resumed after the blip


def test_the_result_is_stored_when_the_database_returns(sqlite_bg, doc, monkeypatch) -> None:
    api = sqlite_bg
    ev_id = _queued(api, doc)
    db, settings = _worker_db(api)
    real_score = evaluation_service.score_file

    def score_then_outage(*args: Any) -> Any:
        out = real_score(*args)
        good = swap(db, refusing())  # down when the result is to be stored; back a second later
        threading.Timer(1.0, lambda: swap(db, good)).start()
        return out

    monkeypatch.setattr("worker.evaluations.evaluations.score_file", score_then_outage)
    assert run_evaluation(db, settings, ev_id, worker="w") == "succeeded"
    assert _row(api, ev_id).state == "succeeded"


def test_the_reaper_resends_a_queued_evaluation_whose_message_is_lost(bg_api, doc) -> None:
    api = bg_api
    ev_id = _queued(api, doc)
    st = api.app.state.service
    with st.db.session() as s:  # enqueued a little longer ago than the grace, far less than the timer
        s.get(Evaluation, ev_id).heartbeat_at = utcnow() - timedelta(seconds=st.settings.lost_message_grace_s + 5)
    app = RecordingApp()
    reap_and_requeue(st.db, st.settings, app, scan=lambda: {ev_id})  # type: ignore[arg-type]  # the broker has it
    assert app.sent == []
    reap_and_requeue(st.db, st.settings, app, scan=set)  # type: ignore[arg-type]  # the broker lost it
    assert app.sent == [(EVALUATE_TASK, ev_id)]
    reap_and_requeue(st.db, st.settings, app, scan=set)  # type: ignore[arg-type]  # stamped: not again at once
    assert app.sent == [(EVALUATE_TASK, ev_id)]


def test_the_broker_scan_sees_evaluation_messages_too(tmp_path) -> None:
    settings = Settings(data_dir=tmp_path, queue="q-scan")
    app = make_celery(settings)
    app.send_task(TRAIN_TASK, args=["job_a"], queue="q-scan")
    app.send_task(EVALUATE_TASK, args=["ev_b"], queue="q-scan")
    app.send_task("other.task", args=["x_c"], queue="q-scan")
    assert broker_scan_for(app, settings)() == {"job_a", "ev_b"}
