"""Model versions: import with retries, listing, the detail view's extra facts, and exports."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.services import registry, reviews
from app.services.errors import Conflict, Invalid
from app.services.paging import Page, page_of_rows
from app.services.rule_texts import condition_texts as texts_of
from app.tables import ModelAlias, ModelVersion, RegisteredModel
from models.rulelist import RuleList

IMPORT_ATTEMPTS = 3
ExportFormat = Literal["text", "sql", "python", "json"]

# The keys a training job writes into a version's `metrics` (worker/training.py `_metrics`): what the service
# itself measured on the rows it held out (and the facts of that split). An import's `metrics` are the importer's
# word, so it may not use these names: a reader (the console, an API client) would take them as measured here.
MEASURED_KEYS = ("holdout", "holdout_evaluation", "train", "test_size", "n_rules", "rows_without_target_dropped")


@dataclass(frozen=True)
class NamedVersion:
    """A version with its model's name, the aliases that point at it and its approval state."""

    version: ModelVersion
    name: str
    aliases: list[str]
    approval: reviews.Approval


def model_name(session: Session, mv: ModelVersion) -> str:
    """The name of a version's model."""
    return session.scalar(select(RegisteredModel.name).where(RegisteredModel.id == mv.registered_model_id)) or ""


def describe(session: Session, mv: ModelVersion) -> NamedVersion:
    """A version with its model's name, aliases and approval state."""
    name = model_name(session, mv)
    aliases = session.scalars(
        select(ModelAlias.alias).where(ModelAlias.version_id == mv.id).order_by(ModelAlias.alias)
    ).all()
    return NamedVersion(mv, name, list(aliases), reviews.approval_of(session, mv))


def import_version(
    session: Session,
    tenant_id: str,
    name: str,
    document: dict[str, Any],
    metrics: dict[str, Any],
    api_key_id: str | None = None,
) -> ModelVersion:
    """Store a rule list trained elsewhere as the next version of `name` (committed)."""
    registry.check_name(name)  # the first field of an import: its 422 comes before the metrics'
    check_supplied_metrics(metrics)
    for _ in range(IMPORT_ATTEMPTS):  # a concurrent import of the same name can take our version number: retry
        try:
            mv = registry.add_version(
                session,
                tenant_id=tenant_id,
                name=name,
                document=document,
                metrics=metrics,
                provenance={"source": "import"},
                api_key_id=api_key_id,
            )
            session.commit()
            return mv
        except IntegrityError:
            session.rollback()
    raise Conflict("concurrent imports of the same model; try again", code="version_conflict")


def check_supplied_metrics(metrics: dict[str, Any]) -> None:
    """422 naming `metrics.<key>` when an import supplies a key the service writes when it trains a version
    (MEASURED_KEYS, e.g. `holdout_evaluation`): stored, it would read as measured by the service. Any other key is
    kept as sent, as the importer's own figures."""
    for key in MEASURED_KEYS:
        if key in metrics:
            raise Invalid.field(
                f"metrics.{key}",
                f"'{key}' is written by the service when it trains a version (measured on the rows training held "
                "out); an imported version's metrics are the importer's own, so send them under another name "
                "(e.g. 'reported_holdout')",
            )


def list_versions(
    session: Session, tenant_id: str, *, name: str | None, limit: int, offset: int
) -> Page[tuple[ModelVersion, str]]:
    """The tenant's versions with their model names, newest first (optionally of one model)."""
    q = (
        select(ModelVersion, RegisteredModel.name)
        .join(RegisteredModel, RegisteredModel.id == ModelVersion.registered_model_id)
        .where(ModelVersion.tenant_id == tenant_id)
    )
    if name:
        q = q.where(RegisteredModel.name == name)
    page = page_of_rows(session, q, (ModelVersion.created_at.desc(), ModelVersion.id), limit, offset)
    return Page([(mv, n) for mv, n in page.items], page.total)


def rendered_texts(mv: ModelVersion) -> tuple[str, list[list[str]]]:
    """The version's if/else text and each condition's text (`rule_texts`), rendered from its document now,
    as explanations and exports are: a `text` stored by an older renderer (`1.7e+09`) is not served."""
    rl = RuleList.from_dict(mv.rule_list)
    return rl.to_text(), texts_of(rl)


def export(mv: ModelVersion, fmt: ExportFormat, table: str) -> str:
    """The version as if/else text, a SQL CASE expression, a Python function or the JSON document."""
    if fmt == "json":
        return json.dumps(mv.rule_list, indent=2)
    rl = RuleList.from_dict(mv.rule_list)
    if fmt == "sql":
        try:
            return rl.to_sql(table)
        except ValueError as e:  # a table name SQL cannot hold, or a NUL in a category
            raise Invalid.field("table" if str(e).startswith("table") else "format", str(e)) from None
    if fmt == "python":
        return rl.to_python()
    return rl.to_text() + "\n"
