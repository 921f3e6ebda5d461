"""Celery tasks (thin) and the job runner that drives one training job through its row."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from celery import Celery, bootsteps
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.exc import IntegrityError

from app.db import Database, is_unavailable_error
from app.services import datasets, registry
from app.services import jobs as jobsvc
from app.services.errors import Conflict, Invalid, NotFound
from app.services.job_states import JobState
from app.services.lost_messages import Resend
from app.settings import Settings
from app.tables import Job
from worker.beat import Beat, OfflineAware
from worker.evaluations import EVALUATE_TASK, reap_evaluations, run_evaluation
from worker.failure_text import failure_text
from worker.liveness import heartbeat_step
from worker.patience import retry_countdown, with_database
from worker.pending import Scan, broker_scan
from worker.training import TrainingInputError, TrainOutcome, package_versions, train_rule_list

log = logging.getLogger("neurules.worker")

TRAIN_TASK = "neurules.train"
REAP_TASK = "neurules.reap"
Trainer = Callable[[bytes, str, dict[str, Any], Callable[[dict[str, Any]], Any]], TrainOutcome]


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Heartbeat(Beat):
    """A background thread that refreshes the job's heartbeat while it trains (even in long epochs)."""

    def __init__(self, db: Database, job_id: str, worker: str, interval: float) -> None:
        super().__init__(partial(_job_heartbeat, db, job_id, worker), interval, f"heartbeat-{job_id}")


def _job_heartbeat(db: Database, job_id: str, worker: str) -> bool:
    """One heartbeat of a running job; False once the job is no longer this worker's."""
    with db.session() as s:
        return jobsvc.heartbeat(s, job_id, worker)


RunOutcome = Literal["skipped", "succeeded", "failed", "cancelled", "discarded"]
STORE_ATTEMPTS = 3


@dataclass(frozen=True)
class JobInputs:
    """What a claimed job trains on, read once at its start."""

    data: bytes
    target: str
    parameters: dict[str, Any]
    tenant_id: str
    model_name: str
    dataset_id: str
    dataset_sha256: str


def _load_inputs(db: Database, job_id: str) -> JobInputs:
    """The job's parameters and its dataset's bytes (TrainingInputError when the dataset is gone)."""
    with db.session() as s:
        job = s.get(Job, job_id)
        if job is None:
            raise TrainingInputError("the job was deleted before training started")
        try:  # the row gone (dataset_id nulled by the delete), or its file (a delete committed in between)
            ds = datasets.get_dataset(s, job.tenant_id, job.dataset_id or "")
            data = datasets.file_bytes(s, ds)
        except NotFound:
            raise TrainingInputError("the dataset was deleted before training started") from None
        return JobInputs(data, job.target, dict(job.parameters), job.tenant_id, job.model_name, ds.id, ds.sha256)


@dataclass
class LastPoint:
    """The latest progress point the database has not recorded (not due, or the database was away): the job's
    success records it, so a finished job never shows an earlier epoch as its last (a disk-fault probe saw a
    succeeded job at epoch 280 of 2,500)."""

    point: dict[str, Any] | None = None


def _progress_callback(
    db: Database, settings: Settings, job_id: str, worker_id: str, unrecorded: LastPoint
) -> Callable[[dict[str, Any]], bool]:
    """Per epoch: progress every few epochs, cancel and deadline checks every epoch (database down: skipped)."""
    deadline = time.monotonic() + settings.training_soft_time_limit_s
    every = settings.progress_every_epochs
    last_write = [0.0]
    offline = OfflineAware(settings.heartbeat_interval_s, "training", job_id)  # train on, look again later

    def write_and_check(progress: dict[str, Any], now: float) -> bool:
        """Write the progress point when one is due; whether cancellation was asked for."""
        epoch, n_epochs = int(progress.get("epoch", 0)), int(progress.get("n_epochs", 0))
        due = epoch % every == 0 or epoch >= n_epochs or epoch <= 1 or now - last_write[0] > 2.0
        wrote = False
        with db.session() as s:
            # cross-fitting repeats the last epoch per fold: checked for a cancel, not recorded (the job keeps
            # the main fit's loss and score, its history one point per epoch)
            if due and progress.get("stage") != "crossfit":
                jobsvc.write_progress(s, job_id, worker_id, progress)
                wrote = True
            cancel = jobsvc.cancel_requested(s, job_id)
        if wrote:  # committed: the session commits on leaving the block, where a full disk fails (not the UPDATE)
            last_write[0] = now
            unrecorded.point = None
        return cancel

    def callback(progress: dict[str, Any]) -> bool:
        now = time.monotonic()
        if progress.get("stage") != "crossfit":
            unrecorded.point = dict(progress)
        if offline.run(partial(write_and_check, progress, now)):
            raise _Stop("cancelled")
        if now > deadline:
            raise _Stop("time_limit")
        return False

    return callback


def _provenance(inputs: JobInputs, outcome: TrainOutcome, job_id: str, worker_id: str) -> dict[str, Any]:
    """Where a trained version came from: data, parameters, seed, packages, device, time, job and worker."""
    return {
        "dataset_id": inputs.dataset_id,
        "dataset_sha256": inputs.dataset_sha256,
        "target": inputs.target,
        "parameters": outcome.parameters,
        "request": inputs.parameters,
        "seed": outcome.seed,
        "packages": package_versions(),
        "device": outcome.device,
        "train_seconds": outcome.seconds,
        "job_id": job_id,
        "worker": worker_id,
    }


def run_job(
    db: Database, settings: Settings, job_id: str, *, worker: str | None = None, trainer: Trainer = train_rule_list
) -> RunOutcome:
    """Run one training job idempotently; returns what happened (skipped/succeeded/failed/cancelled/discarded)."""
    worker_id = f"{worker or socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    with db.session() as s:
        if not jobsvc.claim(s, job_id, worker_id):
            job = s.get(Job, job_id)
            log.info("job not claimable; skipping", extra={"job_id": job_id, "state": job.state if job else None})
            return "skipped"
    log.info("job started", extra={"job_id": job_id, "worker": worker_id})
    patience = settings.stale_after_s  # the job stays ours this long without heartbeats; then the reaper requeues it
    try:
        return _train_and_store(db, settings, job_id, worker_id, trainer)
    except _Stop as e:
        end = partial(_end, db, job_id, worker_id, e.reason)
    except SoftTimeLimitExceeded:
        end = partial(_end, db, job_id, worker_id, "time_limit")
    except Exception as e:
        if is_unavailable_error(e):  # the database stayed away longer than our patience: the reaper takes over
            raise
        end = partial(_fail, db, job_id, worker_id, e)  # whatever training raised fails the job, with the reason
    return with_database(end, patience_s=patience, what="end job")


def _train_and_store(db: Database, settings: Settings, job_id: str, worker_id: str, trainer: Trainer) -> RunOutcome:
    """Train the claimed job and store its version; `discarded` when the job changed hands meanwhile."""
    patience = settings.stale_after_s
    inputs = with_database(partial(_load_inputs, db, job_id), patience_s=patience, what="load inputs")
    unrecorded = LastPoint()
    callback = _progress_callback(db, settings, job_id, worker_id, unrecorded)
    _limit_threads(settings.resolved_train_threads)
    with Heartbeat(db, job_id, worker_id, settings.heartbeat_interval_s):
        outcome = trainer(inputs.data, inputs.target, inputs.parameters, callback)
    provenance = _provenance(inputs, outcome, job_id, worker_id)
    mv_id: str | None = None
    for attempt in range(STORE_ATTEMPTS):  # a concurrent version of the same model can take our number: retry
        try:
            store = partial(_store_result, db, job_id, worker_id, inputs, outcome, provenance, unrecorded.point)
            mv_id = with_database(store, patience_s=patience, what="store result")
            break
        except IntegrityError:
            if attempt == STORE_ATTEMPTS - 1:
                raise
    if mv_id is None:
        log.warning("job changed hands while training; result discarded", extra={"job_id": job_id})
        return "discarded"
    log.info("job succeeded", extra={"job_id": job_id, "model_version_id": mv_id, "seconds": outcome.seconds})
    return "succeeded"


def _fail(db: Database, job_id: str, worker_id: str, e: Exception) -> RunOutcome:
    """End a job that raised: cancelled when the learner relayed our stop, else failed with a readable reason."""
    if type(e).__name__ == "TrainingCancelled" or isinstance(e.__cause__ or e.__context__, _Stop):
        reason = e.__context__.reason if isinstance(e.__context__, _Stop) else "cancelled"
        return _end(db, job_id, worker_id, reason)
    if isinstance(e, (TrainingInputError, Invalid, Conflict)):  # a reason for the user (the model's target, say;
        msg = str(e)  # a model whose registry event chain is broken); logged too, without a traceback: an operator
        log.warning("training job failed on its input", extra={"job_id": job_id, "reason": msg})  # saw no failure
    else:
        log.error("training failed", extra={"job_id": job_id}, exc_info=e)
        msg = failure_text("training", e)
    with db.session() as s:
        jobsvc.finish(s, job_id, worker_id, JobState.FAILED, error=msg)
    return "failed"


def _limit_threads(n: int | None) -> None:
    """Cap torch's intra-op threads (embedded mode keeps cores free for the API)."""
    if n is None:
        return
    try:
        import torch

        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
    except ImportError:  # the trainer will report the missing learner
        pass


def _store_result(
    db: Database,
    job_id: str,
    worker_id: str,
    inputs: JobInputs,
    outcome: TrainOutcome,
    provenance: dict[str, Any],
    last_point: dict[str, Any] | None = None,
) -> str | None:
    """In one transaction: the new model version and the job's success (with the last progress point, where the
    database missed it); None when the job is no longer ours.

    A cancel asked for after the learner's last epoch check (its cross-fitting and extraction stages call no
    callback) is honoured here: no version is stored and the job ends cancelled (`_Stop`)."""
    with db.session() as s:
        job = jobsvc.lock_if_ours(s, job_id, worker_id)
        if job is None:
            return None
        if job.cancel_requested:
            raise _Stop("cancelled")
        mv = registry.add_version(
            s,
            tenant_id=inputs.tenant_id,
            name=inputs.model_name,
            document=outcome.document,
            metrics=outcome.metrics,
            provenance=provenance,
            job_id=job_id,
            api_key_id=job.api_key_id,  # the key that submitted the job: the event names who asked for it
        )
        if last_point is not None:
            jobsvc.write_progress(s, job_id, worker_id, last_point)
        jobsvc.succeed(s, job_id, worker_id, model_version_id=mv.id, device=outcome.device)
        return mv.id


def _end(db: Database, job_id: str, worker_id: str, reason: str) -> RunOutcome:
    """End a stopped job: failed on the time limit, else cancelled."""
    with db.session() as s:
        if reason == "time_limit":
            jobsvc.finish(
                s,
                job_id,
                worker_id,
                JobState.FAILED,
                error="time limit exceeded; train with fewer epochs or a smaller dataset",
            )
            return "failed"
        jobsvc.finish(s, job_id, worker_id, JobState.CANCELLED, error="cancelled by request")
    log.info("job cancelled", extra={"job_id": job_id})
    return "cancelled"


class _LazyDatabase:
    """The worker's database, opened on first use (a Celery app is configured long before it runs a task)."""

    def __init__(self, settings: Settings, db: Database | None = None) -> None:
        self.settings = settings
        self._db = db
        self._lock = threading.Lock()

    def get(self) -> Database:
        """The database, created on first call."""
        with self._lock:
            if self._db is None:
                s = self.settings
                self._db = Database(s.resolved_database_url, s.sqlite_synchronous, s.database_timeouts_ms)
            return self._db


class _NodeName:
    """The Celery node name of the worker running an app's tasks (`embedded@host`, `celery@host`), recorded by a
    worker bootstep when the worker starts.

    `task.request.hostname` is not that name in every pool: a worker started without Celery's worker
    optimisations (the embedded solo-pool worker) traces tasks with the machine's host name (`host`, not
    `embedded@host`), so the jobs it claimed did not carry the prefix its next incarnation requeues at start
    (`worker.runtime.EmbeddedWorker`), and after a restart they stayed `running` until the reaper's stale timeout.
    """

    def __init__(self) -> None:
        self.value: str | None = None

    def step(self) -> type[bootsteps.Step]:
        """A worker bootstep that records the worker's node name here."""
        node = self

        class NodeNameStep(bootsteps.Step):  # type: ignore[misc]  # celery is untyped
            """Records the node name of the worker being built."""

            label = "neurules-node-name"

            def __init__(self, parent: Any, **kwargs: Any) -> None:
                node.value = parent.hostname
                super().__init__(parent, **kwargs)

        return NodeNameStep

    def of(self, task: Any) -> str | None:
        """The name a task's job or evaluation is held under: the worker's node name, else the request's."""
        return self.value or task.request.hostname


def register_tasks(app: Celery, settings: Settings, db: Database | None = None) -> None:
    """Register the training, evaluation and reaper tasks, and every worker's heartbeat row, on a Celery app."""
    holder = _LazyDatabase(settings, db)
    node = _NodeName()
    app.steps["worker"].add(heartbeat_step(holder.get, settings))
    app.steps["worker"].add(node.step())

    def train(self: Any, job_id: str) -> str:
        """Train one job (idempotent: a job that is not queued is skipped); database down: the message goes back."""
        run = partial(run_job, holder.get(), settings, job_id, worker=node.of(self))
        return _run_or_hand_back(self, run, "job", job_id)

    def evaluate(self: Any, evaluation_id: str) -> str:
        """Score one background evaluation (idempotent: a finished or live-held one is skipped)."""
        run = partial(run_evaluation, holder.get(), settings, evaluation_id, worker=node.of(self))
        return _run_or_hand_back(self, run, "evaluation", evaluation_id)

    def reap() -> list[str]:
        """Requeue or fail running jobs whose worker stopped sending heartbeats; re-send lost messages."""
        actions = reap_and_requeue(holder.get(), settings, app, scan=broker_scan_for(app, settings))
        return [f"{a.job_id}:{a.action}" for a in actions]

    # shared=False: each app gets its own closures (a shared task would be the first app's, settings and all)
    # max_retries=None: a job waits out a database outage of any length (`self.retry(max_retries=None)` would
    # mean the task's default, 3)
    for name, fn in ((TRAIN_TASK, train), (EVALUATE_TASK, evaluate)):
        app.task(
            name=name,
            bind=True,
            acks_late=True,
            reject_on_worker_lost=True,
            ignore_result=True,
            shared=False,
            max_retries=None,
        )(fn)
    app.task(name=REAP_TASK, ignore_result=True, shared=False)(reap)


def _run_or_hand_back(task: Any, run: Callable[[], str], what: str, ident: str) -> str:
    """`run()`; when the database is unavailable, the message goes back to the broker, tried again after a delay.

    Not acknowledged as done: a copy goes back to the broker (a duplicate is harmless: only a queued job or
    evaluation can be claimed, once).
    """
    try:
        return run()
    except Exception as e:
        if not is_unavailable_error(e):
            raise
        countdown = retry_countdown(task.request.retries)
        log.warning(
            f"database unavailable; {what} handed back to the broker",
            extra={f"{what}_id": ident, "retry_in_s": countdown, "error": repr(e)[:300]},
        )
        raise task.retry(countdown=countdown) from None


def reap_and_requeue(
    db: Database,
    settings: Settings,
    app: Celery | None,
    dead_worker_prefix: str | tuple[str, ...] | None = None,
    *,
    scan: Scan | None = None,
) -> list[jobsvc.ReapAction]:
    """Sweep stale running jobs (and those of a worker known to be dead) and requeue them; re-send queued jobs
    and evaluations whose message is gone (`scan`: the ids the broker holds; without one, those queued for
    too long). Background evaluations run on the same workers: their stale ones are requeued too."""
    resend = _resend_policy(settings, scan)
    dead = (dead_worker_prefix,) if isinstance(dead_worker_prefix, str) else dead_worker_prefix or ()
    with db.session() as s:
        actions = jobsvc.reap(
            s,
            stale_after_s=settings.stale_after_s,
            max_attempts=settings.max_attempts,
            dead_worker_prefix=dead,
            resend=resend,
        )
    for a in actions:
        log.warning("reaped stale job", extra={"job_id": a.job_id, "action": a.action})
        if a.action in ("requeued", "resent") and app is not None:
            app.send_task(TRAIN_TASK, args=[a.job_id], queue=settings.queue)
    reap_evaluations(db, settings, app, resend, dead)  # the dead worker's evaluations too, not 2.5 min later
    return actions


def _resend_policy(settings: Settings, scan: Scan | None) -> Resend:
    """Which queued rows lost their message: those the scan does not find (after a grace), or without a scan
    those queued for too long; none while the broker cannot be scanned (nothing can be sent now)."""
    timer = Resend(grace_s=settings.lost_message_grace_s, timer_s=settings.resend_queued_after_s)
    if scan is None:
        return timer
    try:
        pending = scan()
    except Exception as e:  # noqa: BLE001 -- the broker is down: nothing can be sent now; stale jobs still reaped
        log.warning("broker scan failed; no re-send this sweep", extra={"error": repr(e)[:300]})
        return Resend()
    return timer if pending is None else Resend(pending=pending, grace_s=settings.lost_message_grace_s)


def broker_scan_for(app: Celery, settings: Settings) -> Scan:
    """The scan of the training queue in this app's broker: ids of the jobs and evaluations it holds a message
    for (see `worker.pending`)."""
    return broker_scan(app, settings.queue, TRAIN_TASK, EVALUATE_TASK)
