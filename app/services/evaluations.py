"""Evaluations: score a model version on one of the tenant's labelled datasets, store the result.

Small datasets are scored in the request; larger ones, or those of a version whose training file is large
(its rows are read to find those the file shares), are queued for the training workers (`evaluation_runs`
drives them). Input the scoring would refuse is refused before anything is
stored, from the dataset's profile (columns) and, in the request, from the scoring itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.services import datasets, registry, versions
from app.services.csvdata import Table, categorical_names, parse_csv
from app.services.errors import NotFound
from app.services.evaluation import Progress, evaluate_table, require_column, require_target, typed_records
from app.services.job_states import JobState
from app.services.jobs import JobQueue, send_or_undo
from app.services.paging import Page, page_of_scalars
from app.services.training_overlap import (
    NO_TRAINING_FILE,
    TRAINING_DATASET_DELETED,
    TRAINING_FILE_TOO_LARGE,
    NoTrainingFile,
    TrainingFile,
    training_overlap,
)
from app.tables import Dataset, Evaluation, ModelVersion, new_id, utcnow
from models.rulelist import RuleList


@dataclass(frozen=True)
class EvaluationRequest:
    """What to score: a dataset, its label column (None: the model's target) and an optional slice column."""

    dataset_id: str
    target: str | None = None
    slice_by: str | None = None


@dataclass(frozen=True)
class VersionRef:
    """The version an evaluation belongs to, as `model_version` in answers."""

    id: str
    name: str
    version: int


def version_ref(session: Session, mv: ModelVersion) -> VersionRef:
    """The version's id, model name and number."""
    return VersionRef(mv.id, versions.model_name(session, mv), mv.version)


def check_columns(rule_list: RuleList, header: Sequence[str], target: str, slice_by: str | None) -> None:
    """Refuse a file that cannot be scored, from its header alone, exactly as the scoring would (target: in
    the file and not a model input, slice column, the model's columns): EvaluationInputError naming the
    request field."""
    table = Table(header=list(header), columns={h: [] for h in header}, n_rows=0)
    require_target(rule_list, table, target)
    if slice_by is not None:
        require_column(table, slice_by, "slice_by")
    typed_records(rule_list, table)


def _training_dataset(session: Session, mv: ModelVersion) -> tuple[Dataset, str] | NoTrainingFile:
    """The version's training dataset and label column from its provenance, or why there is none."""
    provenance = mv.provenance if isinstance(mv.provenance, dict) else {}
    dataset_id, target = provenance.get("dataset_id"), provenance.get("target")
    if not isinstance(dataset_id, str) or not isinstance(target, str):
        return NoTrainingFile(None, NO_TRAINING_FILE)
    ds = session.get(Dataset, dataset_id)
    if ds is None or ds.tenant_id != mv.tenant_id:
        return NoTrainingFile(dataset_id, TRAINING_DATASET_DELETED)
    return ds, target


def training_rows(session: Session, mv: ModelVersion) -> int:
    """Rows of the version's training file (0 when there is none to read)."""
    found = _training_dataset(session, mv)
    return 0 if isinstance(found, NoTrainingFile) else found[0].n_rows


def training_file(session: Session, mv: ModelVersion, *, max_rows: int | None = None) -> TrainingFile | NoTrainingFile:
    """The version's training file from its provenance, or why there is none to compare with (also: more than
    `max_rows` rows, for work done in a request)."""
    found = _training_dataset(session, mv)
    if isinstance(found, NoTrainingFile):
        return found
    ds, target = found
    if max_rows is not None and ds.n_rows > max_rows:
        return NoTrainingFile(ds.id, TRAINING_FILE_TOO_LARGE)
    try:
        return TrainingFile(ds.id, datasets.file_bytes(session, ds), target)
    except NotFound:
        return NoTrainingFile(ds.id, TRAINING_DATASET_DELETED)


def score_file(
    rule_list: RuleList,
    data: bytes,
    target: str,
    slice_by: str | None,
    training: TrainingFile | NoTrainingFile,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Parse the stored CSV and score the rule list on it (the result body of an evaluation), with how many of
    its rows equal rows of the version's training file. Progress reaches 1 only once that file is read too."""
    report = progress or (lambda _: None)
    table = parse_csv(data, keep_text=categorical_names(rule_list))
    result = evaluate_table(rule_list, table, target, slice_by=slice_by, progress=lambda p: report(0.7 * p))
    overlap = training_overlap(rule_list, table, target, training)
    report(1.0)
    return {**result, "training_overlap": overlap}


@dataclass(frozen=True)
class StoredResult:
    """A scoring result as the row keeps it: the counts in their columns, the blocks as JSON."""

    n_rows_in_file: int
    n_rows: int
    blocks: dict[str, Any]

    @classmethod
    def of(cls, result: dict[str, Any]) -> StoredResult:
        """Split the body `evaluate_table` returns."""
        blocks = {k: v for k, v in result.items() if k not in ("n_rows_in_file", "n_rows")}
        return cls(int(result["n_rows_in_file"]), int(result["n_rows"]), blocks)


def _new_row(tenant_id: str, mv: ModelVersion, ds: Dataset, target: str, slice_by: str | None) -> Evaluation:
    return Evaluation(
        id=new_id("ev"),
        tenant_id=tenant_id,
        model_version_id=mv.id,
        dataset_id=ds.id,
        dataset_sha256=ds.sha256,
        target=target,
        slice_by=slice_by,
        progress=0.0,
        attempts=0,
        created_at=utcnow(),  # when asked: a row scored in the request is flushed only after scoring
    )


def create_evaluation(
    session: Session, queue: JobQueue, tenant_id: str, ref: str, req: EvaluationRequest, *, sync_max_rows: int
) -> tuple[Evaluation, VersionRef]:
    """Score now (a dataset and a training file of up to `sync_max_rows` rows: a succeeded row) or queue it (a
    queued row), committed, and the version it scores.
    Bad input raises before anything is stored; a broker that refuses the message leaves nothing either. The
    version is read before the commit: the answer needs no read after it (a database gone right after the commit
    made a 503 for an evaluation that then ran)."""
    mv = registry.resolve(session, tenant_id, ref)
    version = version_ref(session, mv)
    ds = datasets.get_dataset(session, tenant_id, req.dataset_id)
    rule_list = RuleList.from_dict(mv.rule_list)
    target = req.target if req.target is not None else rule_list.target
    check_columns(rule_list, [c["name"] for c in ds.columns], target, req.slice_by)
    row = _new_row(tenant_id, mv, ds, target, req.slice_by)
    if max(ds.n_rows, training_rows(session, mv)) <= sync_max_rows:  # the training file is read to check rows
        data = datasets.file_bytes(session, ds)
        result = score_file(rule_list, data, target, req.slice_by, training_file(session, mv))
        now = utcnow()
        stored = StoredResult.of(result)
        row.state, row.progress, row.started_at, row.finished_at = JobState.SUCCEEDED, 1.0, now, now
        row.n_rows_in_file, row.n_rows, row.result = stored.n_rows_in_file, stored.n_rows, stored.blocks
        session.add(row)
        session.commit()
        return row, version
    row.state, row.heartbeat_at = JobState.QUEUED, utcnow()  # on a queued row: when it was last enqueued
    session.add(row)
    session.commit()
    send_or_undo(session, queue.send_evaluation, row, "evaluation")
    return row, version


def get_evaluation(session: Session, tenant_id: str, evaluation_id: str) -> Evaluation:
    """The tenant's evaluation; NotFound otherwise."""
    row = session.get(Evaluation, evaluation_id)
    if row is None or row.tenant_id != tenant_id:
        raise NotFound(f"evaluation {evaluation_id!r} not found")
    return row


def version_of(session: Session, row: Evaluation) -> VersionRef:
    """The version an evaluation scored."""
    mv = session.get(ModelVersion, row.model_version_id)
    if mv is None:  # the foreign key cascades: a row without its version is gone
        raise NotFound(f"evaluation {row.id!r} not found")
    return version_ref(session, mv)


def list_evaluations(
    session: Session, tenant_id: str, ref: str, *, limit: int, offset: int
) -> tuple[VersionRef, Page[Evaluation]]:
    """A version's evaluations, newest first."""
    mv = registry.resolve(session, tenant_id, ref)
    q = select(Evaluation).where(Evaluation.tenant_id == tenant_id, Evaluation.model_version_id == mv.id)
    page = page_of_scalars(session, q, (Evaluation.created_at.desc(), Evaluation.id), limit, offset)
    return version_ref(session, mv), page


__all__ = [
    "EvaluationRequest",
    "StoredResult",
    "VersionRef",
    "check_columns",
    "create_evaluation",
    "get_evaluation",
    "list_evaluations",
    "score_file",
    "training_file",
    "training_rows",
    "version_of",
]
