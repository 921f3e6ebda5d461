"""Submitting a training job: checks against the dataset profile and limits, the row, the message."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.schemas.jobs import JobCreate
from app.services import datasets, registry
from app.services.auth import Principal
from app.services.errors import Invalid, NotFound
from app.services.job_states import JobState
from app.services.jobs import JobQueue, send_or_undo
from app.services.training_params import check_options, most_auto_epochs
from app.tables import Dataset, Job, new_id, utcnow

MIN_TRAINING_ROWS = 10
MAX_TARGET_CHARS = 300  # the job row's target column


@dataclass(frozen=True)
class JobLimits:
    """The configured ceilings a job request is checked against."""

    max_classes: int
    max_rules: int
    max_epochs: int
    max_restarts: int
    max_category_levels: int = 1_000
    max_encoded_cells: int = 50_000_000


def _bad(field: str, message: str, code: str = "invalid_input") -> Invalid:
    return Invalid.field(field, message, code)


def _check_target(body: JobCreate, ds: Dataset, limits: JobLimits) -> None:
    cols = {c["name"]: c for c in ds.columns}
    if body.target not in cols:
        raise _bad(
            "target",
            f"column {body.target!r} is not in dataset {ds.id} (columns: {', '.join(list(cols)[:30])})",
            "target_not_found",
        )
    if len(body.target) > MAX_TARGET_CHARS:
        raise _bad(
            "target",
            f"column names over {MAX_TARGET_CHARS} characters are not supported as a target "
            f"({len(body.target)} characters); rename the column",
        )
    tc = cols[body.target]
    if tc["distinct"] < 2:
        raise _bad(
            "target",
            f"column {body.target!r} has a single class; a classifier needs at least two",
            "single_class_target",
        )
    if tc["distinct"] > limits.max_classes:
        raise _bad(
            "target",
            f"column {body.target!r} has {tc['distinct']} distinct values; at most "
            f"{limits.max_classes} classes are supported (is it a continuous column?)",
            "too_many_classes",
        )
    if ds.n_rows - tc["missing"] < MIN_TRAINING_ROWS:
        raise _bad(
            "target",
            f"only {ds.n_rows - tc['missing']} rows have a target value; need {MIN_TRAINING_ROWS}",
            "too_few_rows",
        )


def _check_parameters(body: JobCreate, ds: Dataset, limits: JobLimits) -> None:
    cols = {c["name"] for c in ds.columns}
    p = body.parameters
    if p.n_rules > limits.max_rules:
        raise _bad("parameters.n_rules", f"at most {limits.max_rules}")
    if isinstance(p.epochs, int) and p.epochs > limits.max_epochs:
        raise _bad("parameters.epochs", f"at most {limits.max_epochs}")
    if p.features is not None:
        if not p.features:
            raise _bad("parameters.features", "must not be empty")
        unknown = [f for f in p.features if f not in cols]
        if unknown:
            raise _bad("parameters.features", f"unknown column(s): {', '.join(map(repr, unknown))}")
        if body.target in p.features:
            raise _bad("parameters.features", "must not contain the target column")
        if len(set(p.features)) != len(p.features):
            raise _bad("parameters.features", "duplicate column names")
    elif len(cols) < 2:
        raise _bad("target", "the dataset has no column besides the target")
    options = p.model_dump()["options"]
    problem = check_options(p.n_rules, p.epochs, p.random_state, options)
    if problem:
        raise _bad("parameters.options", problem)
    _check_restarts(options, limits)
    _check_folds(options, body, ds)
    _check_encoded_size(body, ds, limits)
    most = most_auto_epochs(options) if p.epochs == "auto" else None
    if most is not None and most > limits.max_epochs:
        raise _bad(
            "parameters.options",
            f"with epochs 'auto' these options can plan up to {most} epochs (max_epochs + target_steps * "
            f"(tune_fraction + refit_fraction, the refit only with validation_fraction > 0)); at most "
            f"{limits.max_epochs}: lower them or give epochs as a number",
        )


def _check_restarts(options: dict[str, Any], limits: JobLimits) -> None:
    """Restarts train side by side (memory and time grow with them): `n_restarts` and `max_restarts` are bounded."""
    for name in ("n_restarts", "max_restarts"):
        value = options.get(name)
        if isinstance(value, int) and value > limits.max_restarts:
            raise _bad(f"parameters.options.{name}", f"at most {limits.max_restarts} (NEURULES_MAX_RESTARTS)")


def _check_encoded_size(body: JobCreate, ds: Dataset, limits: JobLimits) -> None:
    """The learner's input table is one column per numeric feature and one per value (and missing) of each
    categorical one, all rows at once: a categorical feature over `max_category_levels` values, or a table over
    `max_encoded_cells`, is refused here (a 267 KB file of 5,000 ids took the service to 3.6 GB)."""
    used = set(body.parameters.features) if body.parameters.features is not None else None
    features = [c for c in ds.columns if c["name"] != body.target and (used is None or c["name"] in used)]
    inputs = 0
    for c in features:
        if c["type"] != "categorical":
            inputs += 1
            continue
        levels = c["distinct"] + (1 if c["missing"] else 0)
        if c["distinct"] > limits.max_category_levels:
            raise _bad(
                "parameters.features",
                f"categorical column {c['name']!r} has {c['distinct']} distinct values; at most "
                f"{limits.max_category_levels} (NEURULES_MAX_CATEGORY_LEVELS) make readable rules: leave it out "
                "(list the features to use) or group its values",
                "too_many_levels",
            )
        inputs += levels
    if ds.n_rows * inputs > limits.max_encoded_cells:
        raise _bad(
            "parameters.features",
            f"{ds.n_rows} rows x {inputs} learner inputs (one per numeric feature, one per value of a categorical "
            f"one) is over the budget of {limits.max_encoded_cells} cells (NEURULES_MAX_ENCODED_CELLS): use fewer "
            "features or fewer rows",
            "training_input_too_large",
        )


def _check_folds(options: dict[str, Any], body: JobCreate, ds: Dataset) -> None:
    """Cross-fitting trains every restart once per fold (time grows with the folds, and the learner checks for
    cancellation only between epochs of the main fit): more folds than rows only adds empty folds."""
    folds = options.get("selection_folds")
    rows = ds.n_rows - next((c["missing"] for c in ds.columns if c["name"] == body.target), 0)
    if isinstance(folds, int) and folds > rows:
        raise _bad(
            "parameters.options.selection_folds",
            f"at most {rows}, the rows with a target in dataset {ds.id} ({folds} folds would be mostly empty)",
        )


def check_job(body: JobCreate, ds: Dataset, limits: JobLimits) -> str:
    """Validate a job request against the dataset profile and limits; returns the model name."""
    _check_target(body, ds, limits)
    _check_parameters(body, ds, limits)
    if body.model_name is not None:  # checked as sent: an empty name is refused, not replaced by the default
        return registry.check_name(body.model_name, "model_name")
    # none sent: made from the dataset's name, cut to fit (a name starts with a letter or digit: `_x.csv` -> `x`)
    name = (re.sub(r"[^A-Za-z0-9_.-]", "-", ds.name).lstrip("-._").rstrip("-.") or "model")[:100]
    return registry.check_name(name, "model_name")


def submit_job(session: Session, queue: JobQueue, caller: Principal, body: JobCreate, limits: JobLimits) -> Job:
    """Check, store and enqueue a job (with the caller's key, which its version's creation will name); when the
    broker refuses, the row is removed and Unavailable raised."""
    tenant_id = caller.tenant_id
    ds = datasets.get_dataset(session, tenant_id, body.dataset_id)
    model_name = check_job(body, ds, limits)
    rm = registry.find_model(session, tenant_id, model_name)
    if rm is not None:  # refused now, not after training (the version would be refused then)
        registry.check_same_target(session, rm, body.target, "target")
    job = Job(
        id=new_id("job"),
        tenant_id=tenant_id,
        dataset_id=ds.id,
        dataset_sha256=ds.sha256,
        target=body.target,
        model_name=model_name,
        parameters=body.parameters.model_dump(),
        state=JobState.QUEUED,
        heartbeat_at=utcnow(),  # on a queued job: when it was last enqueued (see jobs.reap)
        n_epochs=body.parameters.epochs if isinstance(body.parameters.epochs, int) else 0,
        api_key_id=caller.key_id,
    )
    session.add(job)
    try:
        session.commit()
    except IntegrityError:  # the job's one reference: the dataset was deleted after it was read
        session.rollback()
        raise NotFound(f"dataset {body.dataset_id!r} not found") from None
    send_or_undo(session, queue.send, job, "job")
    return job
