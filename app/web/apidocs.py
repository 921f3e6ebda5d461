"""Offline API docs: /docs (Swagger UI) and /redoc (ReDoc) with their assets served by the app itself.

The files are vendored unmodified from the npm packages (see static/vendor/README.md); no page
references a CDN, Google Fonts or a remote favicon.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from app.web.static_files import DOCS_CSP, VENDOR_DIR, page_headers

SWAGGER_UI_VERSION = "5.35.0"
REDOC_VERSION = "2.5.4"
VENDOR_URL = "/vendor"
FAVICON_URL = "/console/assets/favicon.svg"

router = APIRouter(include_in_schema=False)


def _openapi_url(request: Request) -> str:
    return str(request.app.openapi_url or "/openapi.json")


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    """Swagger UI from local assets; 'Authorize' takes the API key that 'Try it out' then sends."""
    page = get_swagger_ui_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - Swagger UI",
        swagger_js_url=f"{VENDOR_URL}/swagger-ui/swagger-ui-bundle.js?v={SWAGGER_UI_VERSION}",
        swagger_css_url=f"{VENDOR_URL}/swagger-ui/swagger-ui.css?v={SWAGGER_UI_VERSION}",
        swagger_favicon_url=FAVICON_URL,
        # validatorUrl None: Swagger UI would otherwise fetch a badge from a public validator
        swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": False},
    )
    page.headers.update(page_headers(DOCS_CSP))
    return page


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    """ReDoc from local assets, with the system fonts (no Google Fonts)."""
    page = get_redoc_html(
        openapi_url=_openapi_url(request),
        title=f"{request.app.title} - ReDoc",
        redoc_js_url=f"{VENDOR_URL}/redoc/redoc.standalone.js?v={REDOC_VERSION}",
        redoc_favicon_url=FAVICON_URL,
        with_google_fonts=False,
    )
    page.headers.update(page_headers(DOCS_CSP))
    return page


def install(app: FastAPI) -> None:
    """Serve /docs, /redoc and the vendored assets under /vendor."""
    app.include_router(router)
    app.mount(VENDOR_URL, StaticFiles(directory=VENDOR_DIR), name="vendor")
