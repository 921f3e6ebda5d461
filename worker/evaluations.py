"""Background evaluations on the training workers: the task body (claim, score, store) and the reaper's sweep.

The evaluation row is the source of truth, as the job row is for training: messages carry its id only,
a worker scores only a row it claimed, and a result is stored only while the worker still holds it.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Literal

from celery import Celery

from app.db import Database, is_unavailable_error
from app.services import datasets, evaluations
from app.services import evaluation_runs as runs
from app.services.errors import DomainError, NotFound
from app.services.evaluations import StoredResult
from app.services.lost_messages import Resend
from app.services.training_overlap import NoTrainingFile, TrainingFile
from app.settings import Settings
from app.tables import Evaluation, ModelVersion
from models.rulelist import RuleList
from worker.beat import Beat, OfflineAware
from worker.failure_text import failure_text
from worker.patience import with_database

log = logging.getLogger("neurules.worker")

EVALUATE_TASK = "neurules.evaluate"
Outcome = Literal["skipped", "succeeded", "failed", "discarded"]


class _Gone(Exception):
    """What the evaluation needs was deleted meanwhile."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


@dataclass(frozen=True)
class EvaluationInputs:
    """What a claimed evaluation scores."""

    rule_list: RuleList
    data: bytes
    target: str
    slice_by: str | None
    training: TrainingFile | NoTrainingFile


def _load(db: Database, evaluation_id: str) -> EvaluationInputs:
    """The rule list and the dataset's bytes of a claimed evaluation (_Gone when either was deleted)."""
    with db.session() as s:
        row = s.get(Evaluation, evaluation_id)
        mv = s.get(ModelVersion, row.model_version_id) if row is not None else None
        if row is None or mv is None:
            raise _Gone("not_found", "the evaluation or its model version was deleted")
        try:  # the row gone, or its file (a delete committed in between)
            data = datasets.file_bytes(s, datasets.get_dataset(s, row.tenant_id, row.dataset_id))
        except NotFound:
            raise _Gone("dataset_not_found", f"dataset {row.dataset_id!r} was deleted before it was scored") from None
        training = evaluations.training_file(s, mv)
        return EvaluationInputs(RuleList.from_dict(mv.rule_list), data, row.target, row.slice_by, training)


def _beat(db: Database, evaluation_id: str, worker_id: str, progress: float | None = None) -> bool:
    with db.session() as s:
        return runs.heartbeat(s, evaluation_id, worker_id, progress)


def _score(db: Database, settings: Settings, evaluation_id: str, worker_id: str) -> StoredResult:
    """Score the claimed evaluation, writing progress as it goes (skipped while the database is away)."""
    inputs = with_database(partial(_load, db, evaluation_id), patience_s=settings.stale_after_s, what="load evaluation")
    offline = OfflineAware(settings.heartbeat_interval_s, "evaluation", evaluation_id)

    def progress(p: float) -> None:
        offline.run(partial(_beat, db, evaluation_id, worker_id, p))

    with Beat(partial(_beat, db, evaluation_id, worker_id), settings.heartbeat_interval_s, f"beat-{evaluation_id}"):
        result = evaluations.score_file(
            inputs.rule_list, inputs.data, inputs.target, inputs.slice_by, inputs.training, progress
        )
    return StoredResult.of(result)


def run_evaluation(db: Database, settings: Settings, evaluation_id: str, *, worker: str | None = None) -> Outcome:
    """Run one background evaluation idempotently: claim, score, store (or fail with a readable reason).

    A database outage is no failure of the evaluation: progress waits, the result is stored when the
    database returns within `NEURULES_STALE_AFTER_S`, and an outage longer than that is raised (the task
    hands the message back; the reaper requeues the evaluation once its heartbeat is stale).
    """
    worker_id = f"{worker or socket.gethostname()}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
    with db.session() as s:
        if not runs.claim(s, evaluation_id, worker_id, stale_after_s=settings.stale_after_s):
            log.info("evaluation not claimable; skipping", extra={"evaluation_id": evaluation_id})
            return "skipped"
    log.info("evaluation started", extra={"evaluation_id": evaluation_id, "worker": worker_id})
    try:
        result = _score(db, settings, evaluation_id, worker_id)
    except (DomainError, _Gone) as e:  # input the scoring refuses (the message names the column / line)
        end = partial(_fail, db, evaluation_id, worker_id, e.code, e.message)
    except Exception as e:
        if is_unavailable_error(e):
            raise
        log.exception("evaluation failed", extra={"evaluation_id": evaluation_id})
        end = partial(_fail, db, evaluation_id, worker_id, "evaluation_failed", failure_text("evaluation", e))
    else:
        end = partial(_succeed, db, evaluation_id, worker_id, result)
    return with_database(end, patience_s=settings.stale_after_s, what="end evaluation")


def _succeed(db: Database, evaluation_id: str, worker_id: str, result: StoredResult) -> Outcome:
    with db.session() as s:
        ok = runs.succeed(s, evaluation_id, worker_id, result)
    log.info("evaluation finished", extra={"evaluation_id": evaluation_id, "stored": ok})
    return "succeeded" if ok else "discarded"


def _fail(db: Database, evaluation_id: str, worker_id: str, code: str, message: str) -> Outcome:
    with db.session() as s:
        runs.fail(s, evaluation_id, worker_id, code, message)
    return "failed"


def reap_evaluations(
    db: Database,
    settings: Settings,
    app: Celery | None,
    resend: Resend | None = None,
    dead_worker_prefix: tuple[str, ...] = (),
) -> list[runs.ReapAction]:
    """Requeue or fail evaluations whose worker went silent or is known to be dead (`dead_worker_prefix`);
    re-send queued ones whose message is gone (`resend`; by default those queued over
    `NEURULES_RESEND_QUEUED_AFTER_S`)."""
    resend = resend or Resend(timer_s=settings.resend_queued_after_s)
    with db.session() as s:
        actions = runs.reap(
            s,
            stale_after_s=settings.stale_after_s,
            max_attempts=settings.max_attempts,
            resend=resend,
            dead_worker_prefix=dead_worker_prefix,
        )
    for a in actions:
        log.warning("reaped evaluation", extra={"evaluation_id": a.evaluation_id, "action": a.action})
        if a.action in ("requeued", "resent") and app is not None:
            app.send_task(EVALUATE_TASK, args=[a.evaluation_id], queue=settings.queue)
    return actions


__all__ = ["EVALUATE_TASK", "reap_evaluations", "run_evaluation"]
