"""Celery tasks (thin) and the job runner that drives one training job through its row."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded
from sqlalchemy.exc import IntegrityError

from app.db import Database
from app.services import jobs as jobsvc
from app.services import registry
from app.settings import Settings
from app.storage import DatabaseBlobStore
from app.tables import Dataset, Job
from worker.training import TrainingInputError, TrainOutcome, package_versions, train_rule_list

log = logging.getLogger("neurules.worker")

Trainer = Callable[[bytes, str, dict[str, Any], Callable[[dict[str, Any]], Any]], TrainOutcome]


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Heartbeat:
    """A background thread that refreshes the job's heartbeat while it trains (even in long epochs)."""

    def __init__(self, db: Database, job_id: str, worker: str, interval: float) -> None:
        self.db, self.job_id, self.worker, self.interval = db, job_id, worker, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with self.db.session() as s:
                    if not jobsvc.heartbeat(s, self.job_id, self.worker):
                        return
            except Exception:
                log.warning("heartbeat failed", extra={"job_id": self.job_id}, exc_info=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def run_job(
    db: Database, settings: Settings, job_id: str, *, worker: str | None = None, trainer: Trainer = train_rule_list
) -> str:
    """Run one training job idempotently; returns what happened (skipped/succeeded/failed/cancelled/discarded)."""
    worker_id = f"{worker or socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    with db.session() as s:
        if not jobsvc.claim(s, job_id, worker_id):
            job = s.get(Job, job_id)
            log.info("job not claimable; skipping", extra={"job_id": job_id, "state": job.state if job else None})
            return "skipped"
    log.info("job started", extra={"job_id": job_id, "worker": worker_id})
    try:
        with db.session() as s:
            job = s.get(Job, job_id)
            assert job is not None
            ds = s.get(Dataset, job.dataset_id) if job.dataset_id else None
            if ds is None:
                raise TrainingInputError("the dataset was deleted before training started")
            data = DatabaseBlobStore(s).get(ds.blob_key)
            target, params, tenant_id, model_name = job.target, dict(job.parameters), job.tenant_id, job.model_name
            dataset_id, dataset_sha = ds.id, ds.sha256
        deadline = time.monotonic() + settings.training_soft_time_limit_s
        every = settings.progress_every_epochs
        last_write = [0.0]

        def callback(progress: dict[str, Any]) -> bool:
            """Per epoch: progress every few epochs, cancel and deadline checks every epoch."""
            epoch = int(progress.get("epoch", 0))
            n_epochs = int(progress.get("n_epochs", 0))
            now = time.monotonic()
            with db.session() as s:
                if epoch % every == 0 or epoch >= n_epochs or epoch <= 1 or now - last_write[0] > 2.0:
                    jobsvc.write_progress(s, job_id, worker_id, progress)
                    last_write[0] = now
                stop = jobsvc.cancel_requested(s, job_id)
            if stop:
                raise _Stop("cancelled")
            if now > deadline:
                raise _Stop("time_limit")
            return False

        _limit_threads(settings.resolved_train_threads)
        with Heartbeat(db, job_id, worker_id, settings.heartbeat_interval_s):
            outcome = trainer(data, target, params, callback)
        mv_id: str | None = None
        for attempt in range(3):  # a concurrent version of the same model can take our number: retry
            try:
                mv_id = _store_result(
                    db,
                    job_id,
                    worker_id,
                    tenant_id,
                    model_name,
                    outcome,
                    {
                        "dataset_id": dataset_id,
                        "dataset_sha256": dataset_sha,
                        "target": target,
                        "parameters": outcome.parameters,
                        "request": params,
                        "seed": outcome.seed,
                        "packages": package_versions(),
                        "device": outcome.device,
                        "train_seconds": outcome.seconds,
                        "job_id": job_id,
                        "worker": worker_id,
                    },
                )
                break
            except IntegrityError:
                if attempt == 2:
                    raise
        if mv_id is None:
            log.warning("job changed hands while training; result discarded", extra={"job_id": job_id})
            return "discarded"
        log.info("job succeeded", extra={"job_id": job_id, "model_version_id": mv_id, "seconds": outcome.seconds})
        return "succeeded"
    except _Stop as e:
        return _end(db, job_id, worker_id, e.reason)
    except SoftTimeLimitExceeded:
        return _end(db, job_id, worker_id, "time_limit")
    except Exception as e:
        if type(e).__name__ == "TrainingCancelled" or isinstance(e.__cause__ or e.__context__, _Stop):
            reason = e.__context__.reason if isinstance(e.__context__, _Stop) else "cancelled"
            return _end(db, job_id, worker_id, reason)
        if isinstance(e, TrainingInputError):
            msg = str(e)
        else:
            log.exception("training failed", extra={"job_id": job_id})
            msg = f"training failed: {type(e).__name__}: {e}"[:2000]
        with db.session() as s:
            jobsvc.finish(s, job_id, worker_id, "failed", error=msg)
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
    tenant_id: str,
    model_name: str,
    outcome: TrainOutcome,
    provenance: dict[str, Any],
) -> str | None:
    """In one transaction: the new model version and the job's success; None when the job is no longer ours."""
    with db.session() as s:
        job = s.get(Job, job_id, with_for_update=True)
        if job is None or job.state != "running" or job.worker != worker_id:
            return None
        mv = registry.add_version(
            s,
            tenant_id=tenant_id,
            name=model_name,
            document=outcome.document,
            metrics=outcome.metrics,
            provenance=provenance,
            job_id=job_id,
        )
        job.device = outcome.device
        job.state, job.model_version_id, job.error = "succeeded", mv.id, None
        job.finished_at = jobsvc.utcnow()
        return mv.id


def _end(db: Database, job_id: str, worker_id: str, reason: str) -> str:
    with db.session() as s:
        if reason == "time_limit":
            jobsvc.finish(
                s,
                job_id,
                worker_id,
                "failed",
                error="time limit exceeded; train with fewer epochs or a smaller dataset",
            )
            return "failed"
        jobsvc.finish(s, job_id, worker_id, "cancelled", error="cancelled by request")
    log.info("job cancelled", extra={"job_id": job_id})
    return "cancelled"


class _Lazy:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._db: Database | None = None
        self._lock = threading.Lock()

    @property
    def db(self) -> Database:
        """The worker's database, created on first use."""
        with self._lock:
            if self._db is None:
                self._db = Database(self.settings.resolved_database_url)
            return self._db


def register_tasks(app: Celery, settings: Settings, db: Database | None = None) -> None:
    """Register the training and reaper tasks on a Celery app."""
    holder = _Lazy(settings)
    if db is not None:
        holder._db = db

    @app.task(name="neurules.train", bind=True, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
    def train(self: Any, job_id: str) -> str:
        """Train one job (idempotent: a job that is not queued is skipped)."""
        return run_job(holder.db, settings, job_id, worker=self.request.hostname)

    @app.task(name="neurules.reap", ignore_result=True)
    def reap() -> list[str]:
        """Requeue or fail running jobs whose worker stopped sending heartbeats."""
        return [f"{a.job_id}:{a.action}" for a in reap_and_requeue(holder.db, settings, app)]


def reap_and_requeue(
    db: Database, settings: Settings, app: Celery | None, dead_worker_prefix: str | None = None
) -> list[jobsvc.ReapAction]:
    """Sweep stale running jobs (and those of a worker known to be dead) and requeue them."""
    with db.session() as s:
        actions = jobsvc.reap(
            s,
            stale_after_s=settings.stale_after_s,
            max_attempts=settings.max_attempts,
            dead_worker_prefix=dead_worker_prefix,
            resend_queued_after_s=settings.resend_queued_after_s,
        )
    for a in actions:
        log.warning("reaped stale job", extra={"job_id": a.job_id, "action": a.action})
        if a.action in ("requeued", "resent") and app is not None:
            app.send_task("neurules.train", args=[a.job_id], queue=settings.queue)
    return actions
