"""The web console: one static page at /console and its ES modules under /console/assets (no build step).

The page signs in with an API key kept in the browser's sessionStorage and sends it as the
X-API-Key header on every fetch; the server side is only this file server and the JSON API.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from app.web.static_files import CONSOLE_CSP, CONSOLE_DIR, page_headers

router = APIRouter(include_in_schema=False)


@router.get("/console")
def console_redirect() -> RedirectResponse:
    """`/console` -> `/console/` so the page's relative asset URLs resolve under it."""
    return RedirectResponse("/console/", status_code=308)


class RevalidatedStaticFiles(StaticFiles):
    """Static files the browser revalidates on each load (a cheap 304), so an upgrade never mixes module versions."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        """The file, marked `Cache-Control: no-cache`."""
        response = super().file_response(*args, **kwargs)
        response.headers["Cache-Control"] = "no-cache"
        return response


@router.api_route("/console/", methods=["GET", "HEAD"])
def console_page() -> FileResponse:
    """The console's single HTML page, with a strict Content-Security-Policy."""
    return FileResponse(CONSOLE_DIR / "index.html", media_type="text/html", headers=page_headers(CONSOLE_CSP))


def install(app: FastAPI) -> None:
    """Mount the console page and its assets on the app."""
    app.include_router(router)
    app.mount("/console/assets", RevalidatedStaticFiles(directory=CONSOLE_DIR / "assets"), name="console-assets")
