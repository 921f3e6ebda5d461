"""Model versions: import, list, get (by id or name@alias), export as text / SQL / Python."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse

from app.deps import CurrentTenant, DbSession
from app.errors import responses
from app.http.strict_query import StrictQueryRoute
from app.schemas.models import ModelCreate, ModelVersionList, ModelVersionPublic, ModelVersionSummary
from app.schemas.reviews import ApprovalPublic
from app.services import registry, versions
from app.services.errors import Invalid
from app.services.versions import ExportFormat, NamedVersion
from app.tables import ModelVersion

router = APIRouter(prefix="/v1/models", tags=["models"], route_class=StrictQueryRoute)


def summary(mv: ModelVersion, name: str) -> ModelVersionSummary:
    """Version row (with its model's name) -> summary."""
    return ModelVersionSummary(
        id=mv.id,
        name=name,
        version=mv.version,
        n_rules=len(mv.rule_list.get("rules") or []),
        metrics=mv.metrics,
        job_id=mv.job_id,
        created_at=mv.created_at,
    )


def public(v: NamedVersion) -> ModelVersionPublic:
    """Version row with name and aliases -> full response."""
    mv = v.version
    text, condition_texts = versions.rendered_texts(mv)
    return ModelVersionPublic(
        **summary(mv, v.name).model_dump(),
        rule_list=mv.rule_list,
        text=text,
        condition_texts=condition_texts,
        input_schema=mv.input_schema,
        provenance=mv.provenance,
        aliases=v.aliases,
        approval=ApprovalPublic.from_approval(v.approval),
    )


@router.post(
    "",
    status_code=201,
    response_model=ModelVersionPublic,
    responses=responses(401, 409, 422),
    summary="Import a rule-list document as a new immutable version",
)
def import_model(body: ModelCreate, session: DbSession, principal: CurrentTenant) -> ModelVersionPublic:
    """Store a rule list trained elsewhere as the next version of a named model."""
    mv = versions.import_version(
        session, principal.tenant_id, body.name, body.rule_list, body.metrics, api_key_id=principal.key_id
    )
    return public(versions.describe(session, mv))


@router.get("", response_model=ModelVersionList, responses=responses(401))
def list_versions(
    session: DbSession,
    principal: CurrentTenant,
    name: Annotated[str | None, Query(min_length=1, description="only versions of this named model")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=2**31 - 1)] = 0,
) -> ModelVersionList:
    """The tenant's model versions, newest first."""
    page = versions.list_versions(session, principal.tenant_id, name=name, limit=limit, offset=offset)
    return ModelVersionList(
        items=[summary(mv, n) for mv, n in page.items], total=page.total, limit=limit, offset=offset
    )


@router.get(
    "/{ref}",
    response_model=ModelVersionPublic,
    responses=responses(401, 404),
    summary="A version by id, name@alias, name@<number> or name@latest",
)
def read_version(ref: str, session: DbSession, principal: CurrentTenant) -> ModelVersionPublic:
    """One version with its document, text, metrics, schema and provenance."""
    return public(versions.describe(session, registry.resolve(session, principal.tenant_id, ref)))


@router.get(
    "/{ref}/export",
    response_class=PlainTextResponse,
    responses={
        200: {
            "description": "text/plain for every format: if / else if / else text, a SQL CASE expression, "
            "a Python function or the JSON document",
            "content": {
                "text/plain": {
                    "schema": {"type": "string"},
                    "example": "if age >= 60 and smoker in {yes} then risk = high  (p=0.91, support 43)"
                    "\nelse risk = low  (p=0.80, support 150)\n",
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
    format: Annotated[ExportFormat, Query()] = "text",
    table: Annotated[
        str,
        Query(max_length=200, description="table for SQL: name, schema.name or catalog.schema.name (parts quoted)"),
    ] = "records",
) -> PlainTextResponse:
    """Export a version."""
    mv = registry.resolve(session, principal.tenant_id, ref)
    try:
        return PlainTextResponse(versions.export(mv, format, table))
    except Invalid as e:
        raise _as_query_error(e, format) from None


def _as_query_error(e: Invalid, fmt: str) -> Invalid:
    """The export's refusal naming the query parameter as every other check of it does: `query.table` for the
    table name (as its length check), `query.format` for what this model holds that the format cannot (a NUL
    in a column name or category: SQL has no way to write it)."""
    reason = e.details[0]["message"] if e.details else e.message
    if any(d.get("field") == "table" for d in e.details):
        return Invalid.field("query.table", reason, code=e.code)
    return Invalid.field("query.format", f"this model cannot be exported as {fmt}: {reason}", code=e.code)
