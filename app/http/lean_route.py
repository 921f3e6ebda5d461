"""A route class for the hot path: FastAPI documents the endpoint as declared; a lean handler fills its arguments.

FastAPI's generic request handler (dependency solver, content-type parsing through `email.message`,
per-request endpoint context) cost ~60 us per one-record prediction on this VM, a quarter of the
request. For an endpoint whose parameters are only path and query parameters, one JSON body,
the `Request` and the API-key principal, `LeanRoute` fills them the same way, in the same order and
with FastAPI's own validators (`request_params_to_args`, `request_body_to_args`), so the same bad
input gets the same 401/422; any other endpoint keeps FastAPI's handler. The JSON body is parsed by
orjson, with the standard library's parser as the fallback so that what it accepts or refuses (and
its error messages) stay as they were.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.exceptions import HTTPException, RequestValidationError
from pydantic_core import PydanticUndefined as Undefined
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from app.deps import authenticate, current_principal
from app.http.bodies import is_json_content_type
from app.http.jsonbody import LoneSurrogate, loads, repeated_key_error, repeated_key_off_loop
from app.http.strict_query import StrictQueryRoute, query_names, unknown_query_errors


def _parse_json(body: bytes) -> Any:
    """The parsed body (`jsonbody.loads`); the standard library's errors as FastAPI answers them."""
    try:
        return loads(body)
    except LoneSurrogate as e:
        raise RequestValidationError([e.error()], body=None) from None
    except json.JSONDecodeError as e:
        error = {"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error", "input": {}}
        raise RequestValidationError([{**error, "ctx": {"error": e.msg}}], body=e.doc) from e
    except Exception as e:  # as FastAPI: too deep, too many digits, not UTF-8 (the cause says which)
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from e


# a body that took longer than this to arrive has its key checked again before it is decided (the cache's bound
# holds from the decision, not from the request's first bytes)
SLOW_BODY_S = 0.05
LARGE_BODY_BYTES = 256 * 1024  # parsed off the event loop beyond this (a one-record body is a few hundred bytes)


async def _parsed(raw: bytes) -> Any:
    """`_parse_json`, in a worker thread for a large body: the loop goes on serving others meanwhile."""
    return _parse_json(raw) if len(raw) <= LARGE_BODY_BYTES else await run_in_threadpool(_parse_json, raw)


def _plain_str(field: Any) -> bool:
    """A parameter FastAPI validates as a bare `str` (no constraints, no alias)."""
    info = field.field_info
    return info.annotation is str and not info.metadata and field.alias == field.name


class LeanRoute(StrictQueryRoute):
    """An APIRoute whose handler skips FastAPI's generic solver where the endpoint's parameters allow it
    (an unknown query parameter is a 422 on both paths, as on every `StrictQueryRoute`)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The lean handler for an eligible endpoint, FastAPI's otherwise."""
        return self.lean_handler() or super().get_route_handler()

    def lean_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]] | None:
        """The lean handler, None when the endpoint's parameters need FastAPI's solver.

        It needs none of the exit stacks FastAPI's `request_response` puts in the scope, except with
        dependency overrides set, when it hands the request to FastAPI's handler."""
        principal_name = self._principal_name()
        if principal_name is None or len(self.dependant.body_params) > 1:
            return None
        return self._lean_handler(principal_name, super().get_route_handler())

    def _principal_name(self) -> str | None:
        """The argument taking the principal, when that is the only dependency and no header/cookie is declared."""
        d = self.dependant
        if d.header_params or d.cookie_params or len(d.dependencies) != 1:
            return None
        sub = d.dependencies[0]
        return sub.name if sub.call is current_principal else None

    def _lean_handler(
        self, principal_name: str, generic: Callable[[Request], Coroutine[Any, Any, Response]]
    ) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        d = self.dependant
        call: Callable[..., Awaitable[Response]] = self.endpoint
        embed = self._embed_body_fields
        plain_path = [f.name for f in d.path_params] if all(_plain_str(f) for f in d.path_params) else None
        optional = all(not f.field_info.is_required() and not f.field_info.validate_default for f in d.query_params)
        defaults = {f.name: f.field_info.default for f in d.query_params} if optional else None
        allowed = query_names(d)

        async def handler(request: Request) -> Response:
            if getattr(request.app, "dependency_overrides", None):
                return await generic(request)  # overridden dependencies (tests, embedding apps): FastAPI's solver
            # the key first: a request without a valid one is a 401 before its body is read or parsed (a probe's
            # 42 MB body with no key held the event loop for a second before its 401)
            values: dict[str, Any] = {principal_name: await authenticate(request)}
            body: Any = Undefined  # as FastAPI: no body is a missing body, not null
            raw = b""
            if d.body_params:
                arriving = time.monotonic()
                raw = await request.body()
                if time.monotonic() - arriving > SLOW_BODY_S:  # the key as it is now: a body sent a byte at a time
                    values[principal_name] = await authenticate(request)  # was decided with a key long revoked
                if raw:
                    body = await _parsed(raw) if is_json_content_type(request.headers.get("content-type")) else raw
            if raw and body is not raw:  # a key given twice in an object: a 422 naming it, once the key is known
                repeated = await repeated_key_off_loop(raw, body)
                if repeated is not None:
                    raise RequestValidationError([repeated_key_error(repeated)], body=body)
            errors: list[Any] = []
            if plain_path:  # str path parameters: FastAPI's validation would return them as they are
                values.update((name, request.path_params[name]) for name in plain_path)
            else:
                path_values, errors = request_params_to_args(d.path_params, request.path_params)
                values.update(path_values)
            if defaults is not None and not request.scope.get("query_string"):
                values.update((name, copy.copy(v)) for name, v in defaults.items())
            else:
                query_values, query_errors = request_params_to_args(d.query_params, request.query_params)
                values.update(query_values)
                errors += query_errors + unknown_query_errors(request, allowed)
            if d.body_params:
                body_values, body_errors = await request_body_to_args(d.body_params, body, embed)
                values.update(body_values)
                errors += body_errors
            if errors:
                raise RequestValidationError(errors, body=body)
            if d.request_param_name:
                values[d.request_param_name] = request
            return await call(**values)

        return handler
