"""A direct dispatch for the hot path: one-record prediction without the framework's routing layers.

A `POST /v1/models/{ref}/predict` went through FastAPI's router (the included routers' matching and
scope bookkeeping), `request_response` (two exit stacks) and Starlette's exception middleware before
reaching its handler: about a quarter of the CPU of a one-record prediction (py-spy, in process). This
pure ASGI middleware matches that one route by the route's own pattern and calls the handler the route
itself calls (`LeanRoute.lean_handler`: one that needs none of FastAPI's per-request exit stacks), then
sends its response; an exception goes to the handler the application
registered for its class, looked up as Starlette's exception middleware does it, or on outwards
(unexpected errors reach the same 500 handler). Every other request takes the usual way, and so does
every request while dependency overrides are set (tests, embedding applications) or while FastAPI's
OpenTelemetry records it (its router names the span's route).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette._utils import get_route_path, is_async_callable
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

Handler = Callable[[Request], Awaitable[Response]]
ExceptionHandler = Callable[[Request, Exception], Any]


class HotRouteMiddleware:
    """Dispatch the given routes straight to their handlers; anything else down the usual stack."""

    def __init__(self, app: ASGIApp, fastapi_app: FastAPI, routes: list[tuple[APIRoute, Handler]]) -> None:
        self.app, self.fastapi_app = app, fastapi_app
        self.routes = [(route, {m.upper() for m in route.methods or ()}, handler) for route, handler in routes]
        # what Starlette gives its exception middleware as the stack is built: all but the catch-all (Exception, 500)
        self.exception_handlers = {k: v for k, v in fastapi_app.exception_handlers.items() if k not in (500, Exception)}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Call a hot route's handler directly when the request is for one; otherwise pass it on."""
        found = None if self._full_stack(scope) else self._match(scope)
        if found is None:
            await self.app(scope, receive, send)
            return
        route, handler, path_params = found
        scope["route"], scope["endpoint"], scope["path_params"] = route, route.endpoint, path_params
        request = Request(scope, receive, send)
        try:
            response = await handler(request)
        except Exception as exc:
            on_error = self._exception_handler(exc)
            if on_error is None:
                raise
            if is_async_callable(on_error):
                response = await on_error(request, exc)
            else:
                response = await run_in_threadpool(on_error, request, exc)
        await response(scope, receive, send)

    def _full_stack(self, scope: Scope) -> bool:
        """Requests the usual way must serve: not HTTP, dependency overrides set, or FastAPI's OpenTelemetry
        on for this request (its router names the span's route)."""
        return (
            scope["type"] != "http"
            or bool(self.fastapi_app.dependency_overrides)
            or bool(scope.get("fastapi.telemetry"))
        )

    def _match(self, scope: Scope) -> tuple[APIRoute, Handler, dict[str, Any]] | None:
        path = get_route_path(scope)  # as Starlette's routes see it (behind a root_path)
        for route, methods, handler in self.routes:
            m = route.path_regex.match(path)
            if m is not None and scope["method"] in methods:
                convertors = route.param_convertors
                return route, handler, {k: convertors[k].convert(v) for k, v in m.groupdict().items()}
        return None

    def _exception_handler(self, exc: Exception) -> ExceptionHandler | None:
        """The application's handler for the exception's class (the most specific), as Starlette finds it;
        None for the catch-all (500) handler, which the outermost middleware applies."""
        handlers = self.exception_handlers
        if isinstance(exc, HTTPException) and exc.status_code in handlers:
            return handlers[exc.status_code]
        for cls in type(exc).__mro__:
            if cls in handlers:
                return handlers[cls]
        return None
