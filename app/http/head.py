"""HEAD on every GET path: answered as the GET would be, headers only (RFC 9110 9.3.2).

FastAPI routes a GET operation for GET alone, so a monitor or proxy sending HEAD got 405. This
pure ASGI middleware hands a HEAD request on as a GET and sends the response's status and headers
(`content-length` included) without the body. A path without GET still answers 405.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGetMiddleware:
    """Answer HEAD with the GET response's status and headers, and no body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a HEAD request on as GET, dropping the body of its answer; anything else as it is."""
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # the last body message closes the response
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        inner = {**scope, "method": "GET"}
        try:
            await self.app(inner, receive, headers_only)
        finally:  # what routing found, for the middleware outside (the metrics label the HEAD by its route)
            scope.update({k: inner[k] for k in ("route", "endpoint", "path_params") if k in inner})
