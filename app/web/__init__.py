"""The web pages the service serves besides the JSON API: the console at /console and offline API docs."""

from __future__ import annotations

from fastapi import FastAPI

from app.web import apidocs, console


def install_web(app: FastAPI) -> None:
    """Register the console and the offline /docs and /redoc pages (create the app with docs_url=None)."""
    console.install(app)
    apidocs.install(app)
