"""Query parameters an operation does not take are a 422, not ignored.

FastAPI ignores them, so a misspelt filter (`GET /v1/audit?model_name=...` for `model_version_id`) answered
every record as if it had been applied: a silently wrong answer to an auditor. Every /v1 route checks the
names against the ones it declares (its dependencies' included) and names each unknown one. A parameter
given twice (`?state=queued&state=running`, `?limit=600&limit=5`) is a 422 too: FastAPI took the last and
dropped the others, another filter silently not applied. The ops routes (health, readiness, metrics) are
left lenient: probes and scrapers add parameters of their own.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from app.deps import authenticate, current_principal
from app.http.bodies import is_json_content_type
from app.http.jsonbody import LoneSurrogate, loads, repeated_key_error, repeated_key_off_loop


def query_names(dependant: Dependant) -> frozenset[str]:
    """The query parameter names an operation takes (as sent: aliases), its dependencies' included."""
    names: set[str] = set()
    for field in dependant.query_params:
        model = field.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):  # a model of query parameters: its fields
            names.update(f.alias or name for name, f in model.model_fields.items())
        else:
            names.add(field.alias)
    for sub in dependant.dependencies:
        names |= query_names(sub)
    return frozenset(names)


def unknown_query_errors(request: Request, allowed: frozenset[str]) -> list[dict[str, Any]]:
    """One validation error per query parameter name the operation does not take, and per name given more than
    once (none without a query string; no operation takes a list in its query)."""
    if not request.scope.get("query_string"):
        return []
    takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
    names = request.query_params.keys()
    errors = []
    for name in dict.fromkeys(names):
        if name not in allowed:
            errors.append(
                {
                    "type": "unknown_query_parameter",
                    "loc": ("query", name),
                    "msg": f"unknown query parameter; this operation takes {takes}",
                    "input": request.query_params[name],
                }
            )
        elif len(values := request.query_params.getlist(name)) > 1:
            errors.append(
                {
                    "type": "repeated_query_parameter",
                    "loc": ("query", name),
                    "msg": f"given {len(values)} times ({', '.join(map(repr, values[:5]))}); give it once",
                    "input": values,
                }
            )
    return errors


def _has_json_body(request: Request) -> bool:
    """Whether the request may carry a JSON body to check for repeated keys."""
    return request.method in ("POST", "PUT", "PATCH") and is_json_content_type(request.headers.get("content-type"))


async def _body_errors(request: Request) -> list[dict[str, Any]]:
    """A JSON body with a key given twice in one object (FastAPI's parser keeps the last value), or a string
    holding a lone surrogate: its error.

    A body that does not parse is left to FastAPI, which names what is wrong with it."""
    if not _has_json_body(request):
        return []
    raw = await request.body()  # kept by the request: FastAPI reads the same bytes
    if not raw:
        return []
    try:
        parsed = loads(raw)
    except LoneSurrogate as e:  # FastAPI's parser would take it, and the text could never be stored or sent
        return [e.error()]
    except Exception:  # noqa: BLE001 -- FastAPI's own parse reports it
        return []
    path = await repeated_key_off_loop(raw, parsed)
    return [] if path is None else [repeated_key_error(path)]


def takes_a_key(dependant: Dependant) -> bool:
    """Whether the operation authenticates its caller (depends on `current_principal`, directly or not)."""
    return any(sub.call is current_principal or takes_a_key(sub) for sub in dependant.dependencies)


STRICT_QUERY_MARK = "x-strict-query"  # in an operation's OpenAPI object: unknown query parameters are refused


class StrictQueryRoute(APIRoute):
    """An APIRoute whose requests with an unknown query parameter are a 422 naming it (`query.<name>`).

    An operation that takes an API key checks the key first: a request without a valid one is a 401, as
    it is with a known parameter (so the 422, which lists the operation's parameters, needs a key).
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        # every operation of this class answers 422 for an unknown parameter, one without parameters too
        # (GET /v1/keys?foo=1): documented as such (`app.openapi` adds it where an operation has parameters)
        kwargs["openapi_extra"] = {STRICT_QUERY_MARK: True, **(kwargs.get("openapi_extra") or {})}
        super().__init__(path, endpoint, **kwargs)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """FastAPI's handler, behind the check of the query's names."""
        handler = super().get_route_handler()
        allowed = query_names(self.dependant)
        keyed = takes_a_key(self.dependant)

        async def strict(request: Request) -> Response:
            errors = unknown_query_errors(request, allowed)
            overridden = bool(getattr(request.app, "dependency_overrides", None))  # tests, embedding apps
            if keyed and (errors or (_has_json_body(request) and not overridden)):
                await authenticate(request)  # 401 first, as FastAPI's own order would have it (and no body work)
            errors += await _body_errors(request)
            if errors:
                raise RequestValidationError(errors)
            return await handler(request)

        return strict
