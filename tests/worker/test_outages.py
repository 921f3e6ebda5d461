"""Workers under outages: a database that is away does not drain the queue or lose a training run, and the
reaper re-sends queued jobs whose message the broker lost (scanning Redis and the filesystem broker)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from sqlalchemy import Engine, create_engine
from sqlalchemy.orm import sessionmaker

from app.db import Database
from app.settings import Settings
from app.tables import Job, utcnow
from tests.conftest import REDIS_URL, Api, redis_available, skip_unless_ci
from tests.e2e.conftest import free_port
from tests.worker.test_job_runner import RecordingApp, job_row, make_job, trainer
from worker.celery_app import make_celery
from worker.patience import retry_countdown, with_database
from worker.pending import job_id_of, scan_folder, scan_redis
from worker.tasks import TRAIN_TASK, reap_and_requeue, register_tasks, run_job


def refusing() -> Engine:
    """An engine on a port nothing listens on."""
    return create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x")


def swap(db: Database, engine: Engine) -> Engine:
    """Point a Database (and every user of it) at `engine`; returns the previous engine."""
    old = db.engine
    db.engine, db.sessionmaker = engine, sessionmaker(engine, expire_on_commit=False)
    return old


class _Retry(Exception):
    pass


def test_a_worker_without_database_hands_the_message_back_with_backoff(sqlite_api: Api, monkeypatch: Any) -> None:
    """The task does not finish (and so is not acknowledged as done): it asks Celery to retry after a delay."""
    jid = make_job(sqlite_api)
    settings = sqlite_api.settings
    down = Database(settings.resolved_database_url)
    swap(down, refusing())
    app = Celery("t", set_as_current=False)
    register_tasks(app, settings, db=down)
    task = app.tasks[TRAIN_TASK]
    calls: list[dict[str, Any]] = []

    def retry(**kw: Any) -> Exception:
        calls.append(kw)
        return _Retry()

    monkeypatch.setattr(task, "retry", retry)
    for retries in (0, 3, 9):
        task.push_request(retries=retries, hostname="w@h")
        try:
            with pytest.raises(_Retry):
                task.run(jid)
        finally:
            task.pop_request()
    assert [c["countdown"] for c in calls] == [1.0, 8.0, 30.0]
    assert task.max_retries is None and all(c.get("max_retries") is None for c in calls)  # no limit
    assert job_row(sqlite_api, jid).state == "queued"  # nothing claimed; the retried message will claim it


def test_the_message_goes_back_however_long_the_outage_lasts(sqlite_api: Api) -> None:
    """Celery's own retry, many tries in: still a Retry (a new message after 30 s), never MaxRetriesExceeded."""
    from celery.exceptions import Retry

    jid = make_job(sqlite_api)
    down = Database(sqlite_api.settings.resolved_database_url)
    swap(down, refusing())
    app = Celery("t", set_as_current=False)
    app.conf.broker_url = "memory://"
    register_tasks(app, sqlite_api.settings, db=down)
    task = app.tasks[TRAIN_TASK]
    task.push_request(
        id=uuid.uuid4().hex, args=[jid], kwargs={}, retries=50, called_directly=False, hostname="w@h", delivery_info={}
    )
    try:
        with pytest.raises(Retry) as caught:
            task.run(jid)
    finally:
        task.pop_request()
    assert caught.value.when == 30.0


def test_other_task_errors_are_not_retried(sqlite_api: Api, monkeypatch: Any) -> None:
    app = Celery("t", set_as_current=False)
    register_tasks(app, sqlite_api.settings, db=sqlite_api.app.state.service.db)
    task = app.tasks[TRAIN_TASK]
    monkeypatch.setattr("worker.tasks.run_job", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("bug")))
    monkeypatch.setattr(task, "retry", lambda **kw: pytest.fail("retried a bug"))
    task.push_request(retries=0, hostname="w@h")
    try:
        with pytest.raises(RuntimeError):
            task.run("job_x")
    finally:
        task.pop_request()


def test_retry_countdown_grows_to_a_bound() -> None:
    assert [retry_countdown(n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    assert retry_countdown(10_000) == 30


def test_with_database_waits_out_an_outage_but_not_a_bug() -> None:
    from sqlalchemy.exc import OperationalError

    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise OperationalError("SELECT 1", {}, Exception("connection refused"))
        return "done"

    assert with_database(flaky, patience_s=5, what="t", first_delay_s=0.01) == "done" and len(tries) == 3

    def down() -> None:
        raise OperationalError("SELECT 1", {}, Exception("connection refused"))

    t0 = time.monotonic()
    with pytest.raises(OperationalError):
        with_database(down, patience_s=0.3, what="t", first_delay_s=0.05)
    assert time.monotonic() - t0 < 2

    def bug() -> None:
        tries.append(1)
        raise ValueError("bug")

    n = len(tries)
    with pytest.raises(ValueError):
        with_database(bug, patience_s=5, what="t")
    assert len(tries) == n + 1


def test_a_database_blip_during_training_loses_nothing(sqlite_api: Api) -> None:
    """Progress writes are skipped while the database is away; training goes on and its result is stored."""
    jid = make_job(sqlite_api, {"epochs": 40})
    st = sqlite_api.app.state.service
    db = Database(st.settings.resolved_database_url)
    settings = st.settings.model_copy(update={"heartbeat_interval_s": 0.05})
    good: list[Engine] = []

    def blip(progress: dict[str, Any]) -> None:
        if progress["epoch"] == 5:
            good.append(swap(db, refusing()))
        if progress["epoch"] == 30:
            swap(db, good[0])

    def fit(data: bytes, target: str, params: dict[str, Any], cb: Any) -> Any:
        return trainer(sleep=0.01)(data, target, params, lambda p: (blip(p), cb(p))[1])

    assert run_job(db, settings, jid, trainer=fit) == "succeeded"
    job = job_row(sqlite_api, jid)
    assert job.state == "succeeded" and job.model_version_id and job.epoch == 40


def test_the_result_is_stored_when_the_database_returns(sqlite_api: Api) -> None:
    jid = make_job(sqlite_api, {"epochs": 3})
    st = sqlite_api.app.state.service
    db = Database(st.settings.resolved_database_url)

    def fit(data: bytes, target: str, params: dict[str, Any], cb: Any) -> Any:
        out = trainer()(data, target, params, cb)
        good = swap(db, refusing())  # down when the result is to be stored; back 1.5 s later
        threading.Timer(1.5, lambda: swap(db, good)).start()
        return out

    assert run_job(db, st.settings, jid, trainer=fit) == "succeeded"
    assert job_row(sqlite_api, jid).state == "succeeded" and sqlite_api.count("model_versions") == 1


def _old(api: Api, jid: str, seconds: float) -> None:
    with api.app.state.service.db.session() as s:
        s.get(Job, jid).heartbeat_at = utcnow() - timedelta(seconds=seconds)


def test_the_reaper_resends_only_queued_jobs_the_broker_has_no_message_for(api: Api) -> None:
    st = api.app.state.service
    has_msg, lost, fresh = make_job(api), make_job(api), make_job(api)
    grace = st.settings.lost_message_grace_s
    _old(api, has_msg, grace + 5)
    _old(api, lost, grace + 5)
    app = RecordingApp()
    acts = reap_and_requeue(st.db, st.settings, app, scan=lambda: {has_msg})  # type: ignore[arg-type]
    assert [(a.job_id, a.action) for a in acts] == [(lost, "resent")] and app.sent == [lost]
    # sent again: stamped, so not again before the grace is over, even if the scan missed the new message
    assert reap_and_requeue(st.db, st.settings, app, scan=lambda: {has_msg}) == []  # type: ignore[arg-type]
    assert fresh not in app.sent  # enqueued a moment ago: its message may still be on its way


def test_the_reaper_sends_nothing_while_the_broker_cannot_be_scanned(api: Api) -> None:
    st = api.app.state.service
    jid = make_job(api)
    _old(api, jid, st.settings.resend_queued_after_s + 5)

    def broker_down() -> set[str]:
        raise ConnectionError("redis down")

    app = RecordingApp()
    assert reap_and_requeue(st.db, st.settings, app, scan=broker_down) == []  # type: ignore[arg-type]
    assert app.sent == [] and job_row(api, jid).state == "queued"
    acts = reap_and_requeue(st.db, st.settings, app, scan=set)  # type: ignore[arg-type]  # it is back
    assert [a.action for a in acts] == ["resent"] and app.sent == [jid]


def _celery(settings: Settings) -> Celery:
    return make_celery(settings)


def test_scan_of_the_filesystem_broker(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, queue="q-fs")
    app = _celery(settings)
    app.send_task(TRAIN_TASK, args=["job_a"], queue="q-fs")
    app.send_task(TRAIN_TASK, args=["job_b"], queue="q-fs")
    app.send_task("other.task", args=["job_c"], queue="q-fs")
    folder = settings.broker_dir / "queue"
    assert scan_folder(folder, "q-fs", TRAIN_TASK) == {"job_a", "job_b"}
    assert scan_folder(folder, "another", TRAIN_TASK) == set()
    for f in folder.glob("*.msg"):  # the worker took job_a's message
        if job_id_of(f.read_bytes(), TRAIN_TASK) == "job_a":
            f.unlink()
    assert scan_folder(folder, "q-fs", TRAIN_TASK) == {"job_b"}


@pytest.mark.integration
def test_scan_of_redis_sees_waiting_and_recently_delivered_messages(tmp_path: Path) -> None:
    if not redis_available():
        skip_unless_ci("Redis not reachable on 127.0.0.1:6379")
    import redis

    queue = f"nr-scan-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        mode="distributed",
        database_url="postgresql://unused/x",
        broker_url=REDIS_URL,
        queue=queue,
        data_dir=tmp_path,
    )
    app = _celery(settings)
    r = redis.Redis.from_url(REDIS_URL)
    tag = f"tag-{uuid.uuid4().hex}"
    try:
        app.send_task(TRAIN_TASK, args=["job_a"], queue=queue)
        app.send_task(TRAIN_TASK, args=["job_b"], queue=queue, priority=9)  # another list
        assert scan_redis(app, queue, TRAIN_TASK) == {"job_a", "job_b"}
        # a worker takes job_a: popped from the list into the unacked hash
        raw = r.rpop(queue)
        r.hset("unacked", tag, json.dumps([json.loads(raw), "", queue]))
        r.zadd("unacked_index", {tag: time.time()})
        assert scan_redis(app, queue, TRAIN_TASK) == {"job_a", "job_b"}
        r.zadd("unacked_index", {tag: time.time() - 3600})  # held an hour by a consumer that is gone
        assert scan_redis(app, queue, TRAIN_TASK) == {"job_b"}
        r.delete(f"{queue}\x06\x169")  # Redis lost its data
        assert scan_redis(app, queue, TRAIN_TASK) == set()
    finally:
        r.delete(queue, f"{queue}\x06\x169")
        r.hdel("unacked", tag)
        r.zrem("unacked_index", tag)
        r.close()


def test_the_reaper_logs_an_outage_once_in_full_and_its_end(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator probe read the whole traceback every sweep (30 s, per process) through a database outage, and
    nothing when the database came back."""
    from worker import runtime

    outcomes = [RuntimeError("database away"), RuntimeError("database away"), RuntimeError("database away"), None]

    def sweep(*_: Any, **__: Any) -> None:
        out = outcomes.pop(0)
        if out is not None:
            raise out

    monkeypatch.setattr(runtime, "reap_and_requeue", sweep)
    monkeypatch.setattr(runtime, "broker_scan_for", lambda *_: None)
    reaper = runtime.Reaper(None, None, None)  # type: ignore[arg-type]
    failing = False
    with caplog.at_level("INFO", logger="neurules.app"):
        for _ in range(4):
            failing = reaper.sweep(failing)
    lines = [(r.getMessage(), r.exc_info is not None) for r in caplog.records if r.name == "neurules.app"]
    assert lines == [
        ("reaper sweep failed", True),
        ("reaper sweep failed again", False),
        ("reaper sweep failed again", False),
        ("reaper sweep works again", False),
    ]
    assert not failing
