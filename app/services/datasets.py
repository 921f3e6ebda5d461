"""Datasets: validate, profile and store an uploaded CSV; look up, list and delete them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import PurePath

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import Database
from app.services import csvdata, registry_events
from app.services.errors import Conflict, Invalid, NotFound
from app.services.job_states import ACTIVE_JOB_STATES
from app.services.paging import Page, page_of_scalars
from app.services.registry import serialize_on_sqlite
from app.services.registry_events import Actor
from app.services.text_checks import check_printable
from app.storage import DatabaseBlobStore
from app.tables import Dataset, Job, ModelVersion, RegisteredModel, new_id

log = logging.getLogger("neurules.datasets")


@dataclass(frozen=True)
class Upload:
    """The bytes of an uploaded file, its file name and the optional name the user gave it."""

    data: bytes
    filename: str
    name: str | None = None


@dataclass(frozen=True)
class TableLimits:
    """The configured ceilings for an uploaded table."""

    max_rows: int
    max_columns: int


def default_name(filename: str) -> str:
    """The name made from a file name: `heart.csv`, `C:\\data\\heart.csv.gz` -> `heart`; control characters
    dropped; "dataset" when nothing is left (" ", ".csv")."""
    base = PurePath(filename.replace("\\", "/")).name
    if base.lower().endswith(".gz"):
        base = base[:-3]
    if "." in base:
        base = base[: base.rindex(".")]
    return _printable(base).strip()[:MAX_NAME_CHARS] or "dataset"


def _printable(text: str) -> str:
    """The text without control characters."""
    return "".join(ch for ch in text if ch.isprintable())


def get_dataset(session: Session, tenant_id: str, dataset_id: str, *, lock: bool = False) -> Dataset:
    """The tenant's dataset (`lock`: its row locked until the transaction ends); NotFound otherwise."""
    ds = session.get(Dataset, dataset_id, with_for_update=lock)
    if ds is None or ds.tenant_id != tenant_id:
        raise NotFound(f"dataset {dataset_id!r} not found")
    return ds


def _record_training_file_deleted(session: Session, ds: Dataset, api_key_id: str | None) -> None:
    """A `training_file_deleted` event in the chain of every model with a version trained on the dataset (in the
    deletion's transaction): a reviewer with a read key sees who removed the evidence a version rests on, when,
    and which file it was (a log line on the operator's side was all there was)."""
    trained = (
        select(RegisteredModel, ModelVersion.version)
        .join(ModelVersion, ModelVersion.registered_model_id == RegisteredModel.id)
        .join(Job, Job.id == ModelVersion.job_id)
        .where(Job.dataset_id == ds.id, RegisteredModel.tenant_id == ds.tenant_id)
        .order_by(RegisteredModel.id, ModelVersion.version)
    )
    note = f"training file {ds.id} deleted: {ds.name!r}, {ds.n_rows} rows, sha256 {ds.sha256}"
    for rm, version in session.execute(trained).all():
        registry_events.record(session, rm, "training_file_deleted", Actor(api_key_id), to_version=version, note=note)


def file_bytes(session: Session, ds: Dataset) -> bytes:
    """The dataset's file; NotFound when a delete committed since its row was read (the row and its file are
    two statements apart: a concurrent DELETE made the second read a KeyError, a 500)."""
    try:
        return DatabaseBlobStore(session).get(ds.blob_key)
    except KeyError:
        raise NotFound(f"dataset {ds.id!r} not found (deleted meanwhile)") from None


MAX_NAME_CHARS = 200  # the dataset row's name column


def given_name(name: str | None) -> str | None:
    """The name the user gave without surrounding blanks, or refused; None when none or only blanks was given
    (a form's empty field: the name is then made from the file name)."""
    name = name.strip() if name is not None else None
    if not name:
        return None
    if len(name) > MAX_NAME_CHARS:
        raise Invalid.field("name", f"at most {MAX_NAME_CHARS} characters ({len(name)} given)")
    check_printable("name", name)  # a line break or a bidi override would garble every list that shows the name
    return name


def create_dataset(db: Database, tenant_id: str, upload: Upload, limits: TableLimits) -> Dataset:
    """Parse, profile and store a CSV with its bytes in one transaction (blocking: run it off the event loop)."""
    name = given_name(upload.name)
    table = csvdata.parse_csv(upload.data, max_rows=limits.max_rows, max_columns=limits.max_columns)
    profile = csvdata.profile(table)
    with db.session() as session:
        ds = Dataset(
            id=new_id("ds"),
            tenant_id=tenant_id,
            name=name or default_name(upload.filename),
            filename=_printable(upload.filename)[:300],
            sha256=csvdata.sha256(upload.data),
            size_bytes=len(upload.data),
            n_rows=table.n_rows,
            n_columns=len(table.header),
            columns=[p.to_dict() for p in profile],
            blob_key="",
        )
        ds.blob_key = f"datasets/{ds.id}.csv"
        DatabaseBlobStore(session).put(ds.blob_key, upload.data)
        session.add(ds)
    return ds


def list_datasets(session: Session, tenant_id: str, *, limit: int, offset: int) -> Page[Dataset]:
    """The tenant's datasets, newest first."""
    q = select(Dataset).where(Dataset.tenant_id == tenant_id)
    return page_of_scalars(session, q, (Dataset.created_at.desc(), Dataset.id), limit, offset)


def delete_dataset(session: Session, tenant_id: str, dataset_id: str, api_key_id: str | None = None) -> None:
    """Delete a dataset and its bytes (Conflict while a job on it is queued or running). Committed, then logged
    with who deleted it (`api_key_id`), its name and SHA-256, the record an operator keeps of a deletion.

    The row is locked first: a job being submitted on it (its insert holds a key-share lock on the row) is
    committed before the active jobs are counted, so it is counted. SQLite ignores the row lock: there the
    transaction takes the database's write lock before it reads, so a job committed meanwhile is counted and
    one inserted after finds its dataset gone (a 404, not an accepted job that can never train)."""
    serialize_on_sqlite(session)
    ds = get_dataset(session, tenant_id, dataset_id, lock=True)
    active = session.scalar(
        select(func.count()).select_from(Job).where(Job.dataset_id == ds.id, Job.state.in_(sorted(ACTIVE_JOB_STATES)))
    )
    if active:
        raise Conflict(
            f"dataset {dataset_id!r} has {active} queued/running job(s); cancel them first", code="dataset_in_use"
        )
    _record_training_file_deleted(session, ds, api_key_id)
    DatabaseBlobStore(session).delete(ds.blob_key)
    session.delete(ds)
    session.commit()
    log.info(
        "dataset deleted",
        extra={
            "tenant_id": tenant_id,
            "api_key_id": api_key_id,
            "dataset_id": ds.id,
            "dataset_name": ds.name,
            "sha256": ds.sha256,
        },
    )
