"""Model versions: import, list, get (by id or name@alias), export as text / SQL / Python."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.deps import CurrentTenant, DbSession
from app.errors import Conflict, responses
from app.schemas.models import ModelCreate, ModelVersionList, ModelVersionPublic, ModelVersionSummary
from app.services import registry
from app.tables import ModelAlias, ModelVersion, RegisteredModel
from models.rulelist import RuleList

router = APIRouter(prefix="/v1/models", tags=["models"])


def summary(mv: ModelVersion, name: str) -> ModelVersionSummary:
    """Version row -> summary."""
    return ModelVersionSummary(
        id=mv.id, name=name, version=mv.version, metrics=mv.metrics, job_id=mv.job_id, created_at=mv.created_at
    )


def public(session: Session, mv: ModelVersion) -> ModelVersionPublic:
    """Version row -> full response (with its aliases)."""
    name = session.scalar(select(RegisteredModel.name).where(RegisteredModel.id == mv.registered_model_id)) or ""
    aliases = session.scalars(
        select(ModelAlias.alias).where(ModelAlias.version_id == mv.id).order_by(ModelAlias.alias)
    ).all()
    return ModelVersionPublic(
        **summary(mv, name).model_dump(),
        rule_list=mv.rule_list,
        text=mv.text,
        input_schema=mv.input_schema,
        provenance=mv.provenance,
        aliases=list(aliases),
    )


@router.post(
    "",
    status_code=201,
    response_model=ModelVersionPublic,
    responses=responses(401, 422),
    summary="Import a rule-list document as a new immutable version",
)
def import_model(body: ModelCreate, session: DbSession, principal: CurrentTenant) -> ModelVersionPublic:
    """Store a rule list trained elsewhere as the next version of a named model."""
    for attempt in range(3):  # a concurrent import of the same name can take our version number: retry
        try:
            mv = registry.add_version(
                session,
                tenant_id=principal.tenant_id,
                name=body.name,
                document=body.rule_list,
                metrics=body.metrics,
                provenance={"source": "import"},
            )
            session.commit()
            return public(session, mv)
        except IntegrityError:
            session.rollback()
            if attempt == 2:
                raise Conflict("concurrent imports of the same model; try again", code="version_conflict") from None
    raise AssertionError("unreachable")


@router.get("", response_model=ModelVersionList, responses=responses(401))
def list_versions(
    session: DbSession,
    principal: CurrentTenant,
    name: Annotated[str | None, Query(description="only versions of this named model")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> ModelVersionList:
    """The tenant's model versions, newest first."""
    q = (
        select(ModelVersion, RegisteredModel.name)
        .join(RegisteredModel, RegisteredModel.id == ModelVersion.registered_model_id)
        .where(ModelVersion.tenant_id == principal.tenant_id)
    )
    if name:
        q = q.where(RegisteredModel.name == name)
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    rows = session.execute(
        q.order_by(ModelVersion.created_at.desc(), ModelVersion.id).limit(limit).offset(offset)
    ).all()
    return ModelVersionList(items=[summary(mv, n) for mv, n in rows], total=total, limit=limit, offset=offset)


@router.get(
    "/{ref}",
    response_model=ModelVersionPublic,
    responses=responses(401, 404),
    summary="A version by id, name@alias, name@<number> or name@latest",
)
def read_version(ref: str, session: DbSession, principal: CurrentTenant) -> ModelVersionPublic:
    """One version with its document, text, metrics, schema and provenance."""
    return public(session, registry.resolve(session, principal.tenant_id, ref))


@router.get(
    "/{ref}/export",
    response_class=PlainTextResponse,
    responses={
        200: {
            "description": "text (if / else if / else), SQL CASE, Python or the JSON document",
            "content": {
                "text/plain": {
                    "example": "if age >= 60 and smoker in {yes} then risk = high  (p=0.91, support 43)"
                    "\nelse risk = low  (p=0.80, support 150)\n"
                }
            },
        },
        **responses(401, 404, 422),
    },
    summary="The rule list as if/else text, a SQL CASE expression or a Python function",
)
def export_version(
    ref: str,
    session: DbSession,
    principal: CurrentTenant,
    format: Annotated[Literal["text", "sql", "python", "json"], Query()] = "text",
    table: Annotated[str, Query(max_length=200, description="table name for SQL")] = "records",
) -> Any:
    """Export a version."""
    mv = registry.resolve(session, principal.tenant_id, ref)
    rl = RuleList.from_dict(mv.rule_list)
    if format == "text":
        return PlainTextResponse(rl.to_text() + "\n")
    if format == "sql":
        return PlainTextResponse(rl.to_sql(table), media_type="application/sql")
    if format == "python":
        return PlainTextResponse(rl.to_python(), media_type="text/x-python")
    import json

    return PlainTextResponse(json.dumps(mv.rule_list, indent=2), media_type="application/json")
