"""The job runner on a real database with a fake (fast, torch-free) estimator: success, idempotency,
cancel, time limit, readable failures, heartbeats and the reaper."""

from __future__ import annotations

import functools
import threading
import time
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from app.services import jobs as jobsvc
from app.tables import Job, JobProgressPoint, ModelVersion, utcnow
from models.rulelist import Condition, Feature, RuleList
from worker.tasks import reap_and_requeue, run_job
from worker.training import train_rule_list

CSV = b"x,color,target\n" + b"".join(f"{i},{'red' if i % 2 else 'blue'},{int(i >= 30)}\n".encode() for i in range(60))


class FakeClassifier:
    """Stands in for NeuRulesClassifier: one rule `x >= 30`, `epochs` callback calls."""

    def __init__(
        self, n_rules: int = 10, epochs: Any = 5, random_state: int = 0, device: str = "auto", sleep: float = 0.0
    ) -> None:
        self.n_rules, self.epochs, self.random_state, self.device, self.sleep = (
            n_rules,
            epochs,
            random_state,
            device,
            sleep,
        )

    def get_params(self) -> dict[str, Any]:
        return {"n_rules": self.n_rules, "epochs": self.epochs, "random_state": self.random_state}

    def fit(self, X: Any, y: Any, callback: Any = None, eval_set: Any = None) -> FakeClassifier:
        n = self.epochs if isinstance(self.epochs, int) else 5
        for e in range(1, n + 1):
            time.sleep(self.sleep)
            if callback is not None and callback({"epoch": e, "n_epochs": n, "loss": 1.0 / e, "val_score": 0.5}):
                raise RuntimeError("cancelled")
        feats = [Feature("x", "numeric", fill_value=30.0), Feature("color", "categorical", categories=("red", "blue"))]
        classes = sorted(set(np.asarray(y).tolist()))
        self.rule_list_ = RuleList.build(
            classes=classes,
            features=feats,
            rules=[[Condition("x", "between", low=30.0)]],
            X=X,
            y=list(y),
            metadata={"device": "cpu"},
        )
        return self


def trainer(**kw: Any) -> Any:
    return functools.partial(train_rule_list, estimator=lambda **a: FakeClassifier(**{**a, **kw}))


def make_job(api, parameters: dict[str, Any] | None = None) -> str:
    ds = api.client.post("/v1/datasets", files={"file": ("toy.csv", CSV, "text/csv")}, headers=api.h()).json()["id"]
    r = api.client.post(
        "/v1/jobs",
        json={"dataset_id": ds, "target": "target", "parameters": parameters or {"epochs": 6}},
        headers=api.h(),
    )
    assert r.status_code == 202, r.text
    return r.json()["id"]  # type: ignore[no-any-return]


def job_row(api, job_id: str) -> Job:
    with api.app.state.service.db.sessionmaker() as s:
        job = s.get(Job, job_id)
        assert job is not None
        return job


def test_success_creates_version_with_provenance(api) -> None:
    jid = make_job(api)
    st = api.app.state.service
    assert run_job(st.db, st.settings, jid, trainer=trainer()) == "succeeded"
    job = api.client.get(f"/v1/jobs/{jid}", headers=api.h()).json()
    assert job["state"] == "succeeded" and job["progress"]["epoch"] == 6 and job["attempts"] == 1
    assert job["finished_at"] and job["started_at"] and job["device"] == "cpu"
    mv = api.client.get(f"/v1/models/{job['model_version_id']}", headers=api.h()).json()
    assert mv["name"] == "toy" and mv["version"] == 1 and mv["job_id"] == jid
    assert mv["metrics"]["holdout"]["accuracy"] == 1.0 and mv["metrics"]["holdout"]["n_rows"] == 12
    prov = mv["provenance"]
    assert len(prov["dataset_sha256"]) == 64 and prov["seed"] == 0 and "numpy" in prov["packages"]
    assert prov["parameters"]["n_rules"] == 10
    # n_rules is the most the list may keep: 10 asked, the learner kept 1, and both responses say so
    assert job["parameters"]["n_rules"] == 10 and job["n_rules_kept"] == 1 and mv["n_rules"] == 1
    listed = api.client.get("/v1/jobs", headers=api.h()).json()["items"]
    assert [j["n_rules_kept"] for j in listed] == [1]
    assert mv["rule_list"]["target"] == "target"
    # idempotent: a redelivered message for a finished job does nothing
    assert run_job(st.db, st.settings, jid, trainer=trainer()) == "skipped"
    assert api.count("model_versions") == 1


def test_cancelled_while_queued_is_skipped(api) -> None:
    jid = make_job(api)
    api.client.post(f"/v1/jobs/{jid}/cancel", headers=api.h())
    st = api.app.state.service
    assert run_job(st.db, st.settings, jid, trainer=trainer()) == "skipped"
    assert job_row(api, jid).state == "cancelled"


def test_cancel_while_running_stops_at_next_epoch(sqlite_api) -> None:
    api = sqlite_api
    jid = make_job(api, {"epochs": 200})
    st = api.app.state.service
    out: list[str] = []
    t = threading.Thread(target=lambda: out.append(run_job(st.db, st.settings, jid, trainer=trainer(sleep=0.02))))
    t.start()
    for _ in range(200):
        if job_row(api, jid).epoch >= 2:
            break
        time.sleep(0.02)
    r = api.client.post(f"/v1/jobs/{jid}/cancel", headers=api.h())
    assert r.status_code == 202 and r.json()["cancel_requested"]
    t.join(10)
    assert out == ["cancelled"]
    job = job_row(api, jid)
    assert job.state == "cancelled" and job.epoch < 200 and api.count("model_versions") == 0


def test_cancel_after_the_last_epoch_stores_no_version(api) -> None:
    """A cancel answered 202 while the learner runs a stage without callbacks (cross-fitting, extraction)
    ends the job cancelled: no version appears after the user was told the job stops."""
    jid = make_job(api)
    st = api.app.state.service

    def cancel_after_training(data: bytes, target: str, params: dict, cb: Any) -> Any:
        out = trainer()(data, target, params, cb)  # every epoch callback done
        r = api.client.post(f"/v1/jobs/{jid}/cancel", headers=api.h())
        assert r.status_code == 202 and r.json()["state"] == "running"
        return out

    assert run_job(st.db, st.settings, jid, trainer=cancel_after_training) == "cancelled"
    job = job_row(api, jid)
    assert job.state == "cancelled" and job.error == "cancelled by request" and job.model_version_id is None
    assert api.count("model_versions") == 0 and api.count("registered_models") == 0


def test_time_limit(tmp_path) -> None:
    from tests.conftest import make_api

    gen = make_api(
        tmp_path,
        "sqlite",
        training_soft_time_limit_s=1,
        training_time_limit_s=2,
        visibility_timeout_s=60,
        heartbeat_interval_s=1,
        stale_after_s=3,
    )
    api = next(gen)
    try:
        jid = make_job(api, {"epochs": 1000})
        st = api.app.state.service
        assert run_job(st.db, st.settings, jid, trainer=trainer(sleep=0.01)) == "failed"
        job = job_row(api, jid)
        assert job.state == "failed" and "time limit" in (job.error or "")
    finally:
        gen.close()


def test_readable_failure(api, caplog: pytest.LogCaptureFixture) -> None:
    """The user's reason, and a log line for the operator (a job failing on its input logged nothing but Celery's
    'succeeded': an operator probe found no trace of it)."""
    jid = make_job(api, {"epochs": 3})
    st = api.app.state.service
    with st.db.session() as s:  # the API refuses unknown options; a worker must still fail cleanly on them
        job = s.get(Job, jid)
        job.parameters = {**job.parameters, "options": {"no_such_option": 1}}
    assert run_job(st.db, st.settings, jid, trainer=trainer()) == "failed"
    err = job_row(api, jid).error or ""
    assert "invalid training option" in err and "no_such_option" in err
    (line,) = [r for r in caplog.records if r.name == "neurules.worker" and "failed on its input" in r.getMessage()]
    assert line.levelname == "WARNING" and line.job_id == jid and line.reason == err  # type: ignore[attr-defined]


def test_unexpected_error_is_failed_not_stuck(api) -> None:
    jid = make_job(api)
    st = api.app.state.service

    def boom(*a: Any, **k: Any) -> Any:
        raise RuntimeError("GPU fell off the bus")

    assert run_job(st.db, st.settings, jid, trainer=boom) == "failed"
    job = job_row(api, jid)
    assert job.state == "failed" and "RuntimeError: GPU fell off the bus" in (job.error or "")


def test_a_database_error_fails_the_job_without_its_statement(api) -> None:
    """A worker newer than its database failed a job with the whole INSERT and its parameters as the reason (a
    fault probe read it through GET /v1/jobs): the statement stays in the worker's log."""
    from sqlalchemy.exc import ProgrammingError

    jid = make_job(api)
    st = api.app.state.service

    def boom(*a: Any, **k: Any) -> Any:
        raise ProgrammingError("INSERT INTO secret_table (a) VALUES (%(a)s)", {"a": "tenant data"}, Exception("no col"))

    assert run_job(st.db, st.settings, jid, trainer=boom) == "failed"
    error = job_row(api, jid).error or ""
    assert "a database error (Exception)" in error and "secret_table" not in error and "tenant data" not in error


class RecordingApp:
    """Stands in for the Celery app: records the job ids the reaper sends."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send_task(self, name: str, args: list[str], queue: str) -> None:
        """Record one send."""
        self.sent.append(args[0])


def test_reaper_requeues_then_fails_vanished_workers(api) -> None:
    jid = make_job(api)
    st = api.app.state.service
    app = RecordingApp()
    sent = app.sent

    def vanish() -> None:
        with st.db.session() as s:
            assert jobsvc.claim(s, jid, "w1")
            s.get(Job, jid).heartbeat_at = utcnow() - timedelta(seconds=st.settings.stale_after_s + 5)

    vanish()
    acts = reap_and_requeue(st.db, st.settings, app)  # type: ignore[arg-type]
    assert [(a.job_id, a.action) for a in acts] == [(jid, "requeued")] and sent == [jid]
    job = job_row(api, jid)
    assert job.state == "queued" and "vanished" in (job.error or "")
    vanish()  # second attempt also dies (max_attempts = 2)
    acts = reap_and_requeue(st.db, st.settings, app)  # type: ignore[arg-type]
    assert [a.action for a in acts] == ["failed"]
    job = job_row(api, jid)
    assert job.state == "failed" and "worker lost" in (job.error or "")
    # a fresh heartbeat is left alone
    assert reap_and_requeue(st.db, st.settings, app) == []  # type: ignore[arg-type]


def test_reaper_resends_a_long_queued_job_once_per_interval(api) -> None:
    jid = make_job(api)
    st = api.app.state.service
    app = RecordingApp()
    sent = app.sent

    assert reap_and_requeue(st.db, st.settings, app) == []  # type: ignore[arg-type]  # just enqueued
    with st.db.session() as s:  # its message was lost long ago
        s.get(Job, jid).heartbeat_at = utcnow() - timedelta(seconds=st.settings.resend_queued_after_s + 5)
    acts = reap_and_requeue(st.db, st.settings, app)  # type: ignore[arg-type]
    assert [(a.job_id, a.action) for a in acts] == [(jid, "resent")] and sent == [jid]
    assert reap_and_requeue(st.db, st.settings, app) == []  # type: ignore[arg-type]  # not again at once
    assert job_row(api, jid).state == "queued"
    # the duplicate message is harmless: only a queued job can be claimed, once
    with st.db.session() as s:
        assert jobsvc.claim(s, jid, "w1")
    with st.db.session() as s:
        assert not jobsvc.claim(s, jid, "w2")


def test_result_discarded_when_job_changed_hands(api) -> None:
    jid = make_job(api)
    st = api.app.state.service

    def steal(data: bytes, target: str, params: dict, cb: Any) -> Any:
        out = trainer()(data, target, params, cb)
        with st.db.session() as s:  # the reaper decided we were dead meanwhile
            j = s.get(Job, jid)
            j.state, j.worker = "queued", None
        return out

    assert run_job(st.db, st.settings, jid, trainer=steal) == "discarded"
    with st.db.sessionmaker() as s:
        assert s.query(ModelVersion).count() == 0


def test_heartbeat_thread_refreshes(sqlite_api) -> None:
    from worker.tasks import Heartbeat

    jid = make_job(sqlite_api)
    st = sqlite_api.app.state.service
    with st.db.session() as s:
        jobsvc.claim(s, jid, "w")
        s.get(Job, jid).heartbeat_at = utcnow() - timedelta(hours=1)
    with Heartbeat(st.db, jid, "w", 0.05):
        time.sleep(0.3)
    assert (utcnow() - job_row(sqlite_api, jid).heartbeat_at).total_seconds() < 5


@pytest.mark.parametrize(("y", "expect"), [([0, 1] * 10, 4), (["a"] * 3 + ["b"] * 17, 4)])
def test_stratified_split(y: list[Any], expect: int) -> None:
    from worker.training import stratified_split

    tr, te = stratified_split(np.asarray(y, dtype=object), 0.2, 0)
    assert len(te) == expect and len(tr) + len(te) == len(y) and not set(tr) & set(te)
    assert len(set(np.asarray(y, dtype=object)[te].tolist())) == 2


def test_jobs_of_a_dead_embedded_worker_are_requeued_at_once(sqlite_api) -> None:
    from worker.embedded import EMBEDDED_HOST

    jid = make_job(sqlite_api)
    st = sqlite_api.app.state.service
    with st.db.session() as s:
        assert jobsvc.claim(s, jid, f"{EMBEDDED_HOST}/999/abc")  # fresh heartbeat, but its process is gone
    assert reap_and_requeue(st.db, st.settings, None) == []
    acts = reap_and_requeue(st.db, st.settings, None, dead_worker_prefix=f"{EMBEDDED_HOST}/")
    assert [(a.job_id, a.action) for a in acts] == [(jid, "requeued")]
    assert job_row(sqlite_api, jid).state == "queued"


def test_the_embedded_worker_holds_its_jobs_under_its_node_name(sqlite_api, tmp_path) -> None:
    """The jobs the embedded worker claims carry `embedded@<host>/`, the prefix its next incarnation requeues
    at start (the solo pool's task requests name the bare host)."""
    from app.settings import Settings
    from worker.celery_app import make_celery
    from worker.embedded import EMBEDDED_HOST, start_embedded_worker, stop_embedded_worker
    from worker.tasks import TRAIN_TASK

    api = sqlite_api
    jid = make_job(api, {"epochs": 3})
    with api.app.state.service.db.session() as s:  # fails at once, before any training
        job = s.get(Job, jid)
        job.parameters = {**job.parameters, "options": {"no_such_option": 1}}
    settings = Settings(database_url=api.url, data_dir=tmp_path / "embedded", queue="q-node", train_threads=1)
    app = make_celery(settings)
    running = start_embedded_worker(app, settings)
    try:
        app.send_task(TRAIN_TASK, args=[jid], queue="q-node")
        for _ in range(300):
            if job_row(api, jid).state == "failed":
                break
            time.sleep(0.1)
        job = job_row(api, jid)
        assert job.state == "failed" and "no_such_option" in (job.error or "")
        assert (job.worker or "").startswith(f"{EMBEDDED_HOST}/"), job.worker
    finally:
        stop_embedded_worker(running)


def test_cross_fitting_keeps_the_jobs_score_and_history(sqlite_api) -> None:
    """Cross-fitting's fold epochs are checked for a cancel but not recorded: the job keeps the main fit's
    final loss and score, and its history one point per recorded epoch (none repeated)."""
    api = sqlite_api
    jid = make_job(api, {"epochs": 6, "n_rules": 3, "options": {"selection_folds": 2, "n_restarts": 2}})
    st = api.app.state.service
    assert run_job(st.db, st.settings, jid) == "succeeded"
    job = job_row(api, jid)
    assert job.epoch == job.n_epochs == 6 and job.val_score is not None
    with st.db.sessionmaker() as s:
        epochs = list(s.scalars(select(JobProgressPoint.epoch).where(JobProgressPoint.job_id == jid)))
    assert epochs and len(epochs) == len(set(epochs)) and max(epochs) == 6, epochs


def test_the_jobs_last_score_is_its_versions_held_out_f1(sqlite_api) -> None:
    """A job's last `val_score` (and its history's last point) scored the network before the list was
    consolidated: 0.494 where the version's held-out weighted F1 said 0.564 (a numbers probe). Both are the
    served list's score now."""
    api = sqlite_api
    rng = np.random.default_rng(0)  # three noisy classes, missing cells: the list decides unlike the network
    age, income = rng.integers(20, 80, 300).astype(float), np.round(rng.normal(50, 20, 300), 1)
    color = rng.choice(["red", "green", "blue"], 300)
    score = (age > 50) + (income > 55) + (color == "red") * 0.7 + rng.normal(0, 0.8, 300)
    y = np.where(score > 1.8, "hi", np.where(score > 0.8, "mid", "lo"))
    rows = [
        f"{'' if i % 17 == 0 else f'{age[i]:g}'},{'?' if i % 23 == 0 else f'{income[i]:g}'},{color[i]},{y[i]}"
        for i in range(300)
    ]
    data = ("age,income,color,y\n" + "\n".join(rows) + "\n").encode()
    ds = api.client.post("/v1/datasets", files={"file": ("mix.csv", data, "text/csv")}, headers=api.h()).json()
    parameters = {"n_rules": 4, "epochs": 20, "test_size": 0.3}
    r = api.client.post(
        "/v1/jobs", json={"dataset_id": ds["id"], "target": "y", "parameters": parameters}, headers=api.h()
    )
    assert r.status_code == 202, r.text
    jid = r.json()["id"]
    st = api.app.state.service
    assert run_job(st.db, st.settings, jid) == "succeeded"
    job = api.client.get(f"/v1/jobs/{jid}", headers=api.h()).json()
    mv = api.client.get(f"/v1/models/{job['model_version_id']}", headers=api.h()).json()
    held_out = mv["metrics"]["holdout"]["weighted_f1"]
    points = api.client.get(f"/v1/jobs/{jid}/history", headers=api.h()).json()["points"]
    assert points[-1]["epoch"] == max(p["epoch"] for p in points) == job["progress"]["n_epochs"], points
    assert abs(points[-1]["val_score"] - held_out) < 1e-6, (points[-1], held_out)
    assert abs(job["progress"]["val_score"] - held_out) < 1e-6, (job["progress"], held_out)


def test_the_embedded_worker_recovers_when_its_broker_folder_is_deleted(sqlite_api, tmp_path, monkeypatch) -> None:
    """Deleting the broker folder ended the embedded worker for good (Celery: "Unrecoverable error:
    FileNotFoundError"); once the folder was made again, jobs were accepted and never trained until a restart
    (a fault probe). Now the folder is made again before each send and each start, and a worker that stopped on
    its own is replaced after a pause."""
    import shutil

    from app.settings import Settings
    from worker import embedded
    from worker.celery_app import CeleryQueue, make_celery

    monkeypatch.setattr(embedded, "RESTART_PAUSES_S", (0.2,))
    api = sqlite_api
    settings = Settings(database_url=api.url, data_dir=tmp_path / "embedded", queue="q-gone", train_threads=1)
    app = make_celery(settings)
    running = embedded.start_embedded_worker(app, settings)
    try:
        time.sleep(1.0)  # consuming
        first = running.controller
        shutil.rmtree(settings.broker_dir)
        for _ in range(100):  # the worker polls the missing folder and stops on its own, then is replaced
            if running.controller is not first and running.thread.is_alive():
                break
            time.sleep(0.1)
        assert running.controller is not first and running.thread.is_alive()
        jid = make_job(api, {"epochs": 3})
        with api.app.state.service.db.session() as s:  # fails at once, before any training: quick to see
            job = s.get(Job, jid)
            job.parameters = {**job.parameters, "options": {"no_such_option": 1}}
        CeleryQueue(app, "q-gone").send(jid)  # the folder is made again for it
        for _ in range(300):
            if job_row(api, jid).state == "failed":
                break
            time.sleep(0.1)
        assert job_row(api, jid).state == "failed" and "no_such_option" in (job_row(api, jid).error or "")
    finally:
        embedded.stop_embedded_worker(running)
    assert not running.thread.is_alive()


def test_jobs_an_older_embedded_worker_held_are_requeued_at_once_too(sqlite_api) -> None:
    """An upgrade probe: a release before 0b345df held its jobs under the bare host name (`<host>/<pid>/...`), so
    after an upgrade the new embedded worker's start left them `running` until the reaper's stale timeout."""
    import socket

    from worker.embedded import EMBEDDED_HOLDERS

    jid = make_job(sqlite_api)
    st = sqlite_api.app.state.service
    with st.db.session() as s:
        assert jobsvc.claim(s, jid, f"{socket.gethostname()}/999/abc")  # fresh heartbeat, its process gone
    acts = reap_and_requeue(st.db, st.settings, None, dead_worker_prefix=EMBEDDED_HOLDERS)
    assert [(a.job_id, a.action) for a in acts] == [(jid, "requeued")]
    assert job_row(sqlite_api, jid).state == "queued"


def test_a_job_whose_model_chain_was_tampered_with_fails_saying_so(api) -> None:
    """A reviewer: a job storing a version on a model whose registry head was moved back outside the service hit
    the 409 `registry_chain_broken`, and the job's error read "training failed: Conflict: ..." beside a traceback.
    It says what is wrong, as a refused input does."""
    from sqlalchemy import text

    first = make_job(api)
    st = api.app.state.service
    assert run_job(st.db, st.settings, first, trainer=trainer()) == "succeeded"
    model = job_row(api, first).model_name
    with st.db.engine.begin() as c:  # one event (version 1 created): the head moved back before it
        c.execute(text(f"UPDATE registered_models SET events_seq = 0 WHERE name = '{model}'"))
    again = make_job(api)
    assert run_job(st.db, st.settings, again, trainer=trainer()) == "failed"
    err = job_row(api, again).error or ""
    assert err.startswith(f"model {model!r}: its registry event chain is broken"), err


def test_a_clean_stop_puts_its_jobs_back_without_counting_the_attempt(api) -> None:
    """An operator probe: a SIGTERM during training left the job `running`; the next start's sweep requeued it
    counting the attempt, and after two deploys it failed "worker lost ... resubmit the job". The stopping worker
    now hands its jobs back; another worker's job, and one asked to cancel, are left as they are."""
    from worker.embedded import EMBEDDED_HOST

    mine, other, cancelling = make_job(api), make_job(api), make_job(api)
    st = api.app.state.service
    with st.db.session() as s:
        assert jobsvc.claim(s, mine, f"{EMBEDDED_HOST}/4242/aa")
        assert jobsvc.claim(s, other, f"{EMBEDDED_HOST}/42420/bb")  # another process (a prefix of its pid)
        assert jobsvc.claim(s, cancelling, f"{EMBEDDED_HOST}/4242/cc")
        s.get(Job, cancelling).cancel_requested = True
    with st.db.session() as s:
        assert jobsvc.hand_back(s, f"{EMBEDDED_HOST}/4242/") == [mine]
    row = job_row(api, mine)
    assert (row.state, row.worker, row.attempts) == ("queued", None, 0) and row.error == jobsvc.HANDED_BACK
    assert job_row(api, other).state == job_row(api, cancelling).state == "running"
    for _ in range(3):  # three deploys during one training: it still trains, then succeeds
        with st.db.session() as s:
            assert jobsvc.claim(s, mine, f"{EMBEDDED_HOST}/4242/aa")
            assert jobsvc.hand_back(s, f"{EMBEDDED_HOST}/4242/") == [mine]
    assert job_row(api, mine).attempts == 0
    assert run_job(st.db, st.settings, mine, trainer=trainer()) == "succeeded"


def test_a_succeeded_job_shows_its_last_epoch_though_the_database_missed_it(sqlite_api, monkeypatch) -> None:
    """A disk-fault probe: the data disk was full while a job trained, its progress writes were skipped, and the job
    ended `succeeded` at epoch 280 of 2,500 (its last recorded point). The success records the last point."""
    import sqlite3

    from sqlalchemy.exc import OperationalError

    api = sqlite_api
    jid = make_job(api, {"epochs": 6})
    st = api.app.state.service
    real = jobsvc.write_progress

    def disk_full_after_epoch_2(session: Any, job_id: str, worker: str, progress: dict[str, Any]) -> None:
        if progress["epoch"] > 2:
            raise OperationalError("UPDATE jobs", {}, sqlite3.OperationalError("database or disk is full"))
        real(session, job_id, worker, progress)

    monkeypatch.setattr(jobsvc, "write_progress", disk_full_after_epoch_2)
    outcome = run_job(st.db, st.settings, jid, trainer=_restoring(trainer(), monkeypatch, real))
    assert outcome == "succeeded"
    job = job_row(api, jid)
    assert (job.epoch, job.n_epochs, job.loss) == (6, 6, pytest.approx(1 / 6))
    with st.db.sessionmaker() as s:
        epochs = sorted(s.scalars(select(JobProgressPoint.epoch).where(JobProgressPoint.job_id == jid)))
    assert epochs[0] == 1 and epochs[-1] == 6 and 3 not in epochs, epochs  # 3-5: skipped while the disk was full


def test_the_last_point_counts_as_recorded_only_once_committed(sqlite_api, monkeypatch) -> None:
    """A full disk fails SQLite's COMMIT (WAL frames are appended there), not the UPDATE before it: the last point,
    written but not committed, is recorded with the success all the same (a reviewer's case)."""
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.exc import OperationalError

    api = sqlite_api
    jid = make_job(api, {"epochs": 6})
    st = api.app.state.service
    real = jobsvc.write_progress

    def commit_fails_at_epoch_6(session: Any, job_id: str, worker: str, progress: dict[str, Any]) -> None:
        real(session, job_id, worker, progress)
        if progress["epoch"] == 6:

            def full(_: Any) -> None:
                raise OperationalError("COMMIT", {}, sqlite3.OperationalError("database or disk is full"))

            event.listen(session, "before_commit", full, once=True)

    monkeypatch.setattr(jobsvc, "write_progress", commit_fails_at_epoch_6)
    assert run_job(st.db, st.settings, jid, trainer=_restoring(trainer(), monkeypatch, real)) == "succeeded"
    assert job_row(api, jid).epoch == 6


def _restoring(train: Any, monkeypatch: Any, real: Any) -> Any:
    """The trainer, after which the database's writes work again (the disk freed before the result is stored)."""

    def run(*a: Any, **kw: Any) -> Any:
        out = train(*a, **kw)
        monkeypatch.setattr(jobsvc, "write_progress", real)
        return out

    return run


def test_a_requeued_job_shows_its_new_attempts_progress_not_the_dead_ones(sqlite_api) -> None:
    """A crash probe: a job requeued at epoch 135 read `running, attempts 2, epoch 135`, then went back to 115. A new
    attempt starts from epoch 0 (the history keeps both attempts' points, each with its attempt)."""
    api = sqlite_api
    jid = make_job(api)
    st = api.app.state.service
    with st.db.session() as s:
        assert jobsvc.claim(s, jid, "w1")
        jobsvc.write_progress(s, jid, "w1", {"epoch": 135, "n_epochs": 400, "loss": 0.3, "val_score": 0.8})
        s.get(Job, jid).heartbeat_at = utcnow() - timedelta(seconds=st.settings.stale_after_s + 5)
    assert [a.action for a in reap_and_requeue(st.db, st.settings, RecordingApp())] == ["requeued"]  # type: ignore[arg-type]
    with st.db.session() as s:
        assert jobsvc.claim(s, jid, "w2")
    job = job_row(api, jid)
    assert (job.attempts, job.epoch, job.loss, job.val_score) == (2, 0, None, None)
    history = api.client.get(f"/v1/jobs/{jid}/history", headers=api.h()).json()["points"]
    assert [(p["epoch"], p["attempt"]) for p in history] == [(135, 1)]
