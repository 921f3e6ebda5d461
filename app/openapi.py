"""The OpenAPI document as generated clients need it: short stable operation ids, one shared error schema.

Operation ids (`operation_id`, given to FastAPI as `generate_unique_id_function`, so every route, also one
added later, gets its id by the same rule without naming it): `<resource>_<action>`.

- resource: the first path segment after the version prefix (`/v1/registered-models/...` ->
  `registered_models`); for an unversioned path (`/healthz`) the route's first tag (`ops`).
- action, from the method and the segments after the resource (`{parameters}` skipped; `-` and `.`
  become `_`):
  - none (`/v1/jobs`, `/v1/jobs/{job_id}`): on the collection GET `list`, POST `create`; on an item
    GET `get`, PUT `update`, PATCH `patch`, DELETE `delete`;
  - some, ending in a static segment (`/v1/jobs/{job_id}/cancel`, `/v1/models/{ref}/predict.csv`):
    those segments joined by `_` for GET and POST (`cancel`, `predict_csv`, `export`), with `_<method>`
    for the other methods;
  - some, ending in a `{parameter}` (`/v1/registered-models/{name}/aliases/{alias}`): those segments and
    the item verb (`aliases_update`, `aliases_delete`).

So `POST /v1/datasets` is `datasets_create`, `GET /v1/jobs/{job_id}` is `jobs_get`. Two routes the rule
gives one id (GET and POST on the same sub-path) make `complete_openapi` fail: give one `operation_id=`.

`complete_openapi` then makes every error response refer to the one `Error` component and documents the
statuses that layers below the routers answer on every operation: 401 and 503 where an API key is
required (authentication and the database), 422 where there are parameters or a body, 413 where there is
a body (the size limit), 400 and 415 for multipart uploads.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

from app.errors import ERROR_TEXT
from app.http.strict_query import STRICT_QUERY_MARK
from app.schemas.errors import Error
from app.services import key_scopes

VERSION_SEGMENT = re.compile(r"^v\d+$")
COLLECTION_VERBS = {"GET": "list", "POST": "create"}
ITEM_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "post"}
ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _ident(text: str) -> str:
    return re.sub(r"[^0-9a-zA-Z]+", "_", text).strip("_").lower()


def operation_id(route: APIRoute) -> str:
    """The operation id of a route by the rule in this module's docstring."""
    parts = [p for p in route.path_format.split("/") if p]
    if parts and VERSION_SEGMENT.match(parts[0]) and len(parts) > 1:
        resource, rest = _ident(parts[1]), parts[2:]
    else:
        resource, rest = _ident(str(route.tags[0])) if route.tags else "root", parts
    method = sorted(route.methods or {"GET"})[0]
    ends_in_parameter = bool(rest) and rest[-1].startswith("{")
    static = [_ident(p) for p in rest if not p.startswith("{")]
    if not static:
        verbs = ITEM_VERBS if ends_in_parameter else COLLECTION_VERBS
        return f"{resource}_{verbs.get(method, method.lower())}"
    base = "_".join(static)
    if ends_in_parameter:
        return f"{resource}_{base}_{ITEM_VERBS.get(method, method.lower())}"
    return f"{resource}_{base}" if method in ("GET", "POST") else f"{resource}_{base}_{method.lower()}"


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(path, method, operation) of every operation."""
    return [
        (path, method, op)
        for path, item in schema.get("paths", {}).items()
        for method, op in item.items()
        if isinstance(op, dict)
    ]


def _implied_statuses(op: dict[str, Any], path: str, method: str) -> list[int]:
    """Statuses the layers below the router answer for this operation."""
    codes = []
    if op.get("security"):
        codes += [401, 503]
        if not all(key_scopes.allows(s, method, path) for s in key_scopes.SCOPES):  # some key's scope is refused here
            codes.append(403)
    body = op.get("requestBody")
    if op.get(STRICT_QUERY_MARK) or op.get("parameters") or body:
        codes.append(422)
    if body:
        codes.append(413)
        if "multipart/form-data" in body.get("content", {}):
            codes += [400, 415]
    return codes


def _is_error_body(response: dict[str, Any]) -> bool:
    """Whether a documented response carries no body schema, or the validation-error or Error one.

    (Under any media type: FastAPI files an error model under the route's own response class, e.g.
    `text/plain` for an export, although every error is JSON.)
    """
    content = response.get("content") or {}
    refs = {media.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1] for media in content.values()}
    return not content or refs <= {"HTTPValidationError", "Error"}


def _complete_operation(op: dict[str, Any], path: str, method: str) -> None:
    responses = op.setdefault("responses", {})
    for code in _implied_statuses(op, path, method):
        responses.setdefault(str(code), {"description": ERROR_TEXT[code]})
    for code, response in responses.items():
        if code != "default" and int(code) < 400:
            continue
        if _is_error_body(response):
            response["content"] = {"application/json": {"schema": dict(ERROR_REF)}}
            if response.get("description") == "Validation Error":
                response["description"] = ERROR_TEXT[422]
    op["responses"] = dict(sorted(responses.items()))


def complete_openapi(schema: dict[str, Any]) -> dict[str, Any]:
    """Every error response as `$ref: Error`, the implied statuses added, unique operation ids checked."""
    ops = _operations(schema)
    duplicates = [i for i, n in Counter(op.get("operationId") for _, _, op in ops).items() if n > 1]
    if duplicates:
        raise RuntimeError(f"operation ids given to more than one route: {duplicates}; set operation_id= on one")
    for path, method, op in ops:
        _complete_operation(op, path, method)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.setdefault("Error", Error.model_json_schema(ref_template="#/components/schemas/{model}"))
    for name, sub in Error.model_json_schema(ref_template="#/components/schemas/{model}").get("$defs", {}).items():
        components.setdefault(name, sub)
    components["Error"].pop("$defs", None)
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Serve the completed document (built once, on first request)."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title,
                version=app.version,
                openapi_version=app.openapi_version,
                description=app.description,
                routes=app.routes,
                tags=app.openapi_tags,
            )
            app.openapi_schema = complete_openapi(schema)
        return app.openapi_schema

    openapi: Callable[[], dict[str, Any]] = build
    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to customise the document
