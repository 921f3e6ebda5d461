"""The one error shape every 4xx/5xx answer has (`Error` in the OpenAPI components)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ErrorDetail(BaseModel):
    """One problem with one field, row or record."""

    model_config = ConfigDict(extra="allow")

    field: str = Field(description="where: a dotted path (`parameters.options.lr`, `records[2].age`, `line 7.age`)")
    message: str = Field(description="what is wrong, in plain words")


class ErrorInfo(BaseModel):
    """What went wrong: a stable code, a readable message and per-field details."""

    code: str = Field(description="stable machine-readable code, e.g. `invalid_input`, `not_found`")
    message: str = Field(description="readable message; names the field, row or record")
    details: list[ErrorDetail] = Field(default_factory=list, description="one entry per problem found")


class Error(BaseModel):
    """The body of every error response."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": {
                        "code": "invalid_input",
                        "message": "parameters.options.lr: must be a number",
                        "details": [{"field": "parameters.options.lr", "message": "must be a number"}],
                    }
                }
            ]
        }
    )

    error: ErrorInfo
