"""Where the packaged static files live, and the security headers the HTML pages are sent with."""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
CONSOLE_DIR = STATIC_DIR / "console"
VENDOR_DIR = STATIC_DIR / "vendor"

# The console is plain ES modules and a style sheet from this origin: nothing inline, nothing remote.
CONSOLE_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

# Swagger UI and ReDoc pages carry one small inline start-up script and inline styles; every
# resource still comes from this origin, so the docs work (and are proven to work) offline.
DOCS_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'unsafe-inline'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)


def page_headers(csp: str) -> dict[str, str]:
    """Headers for an HTML page: its Content-Security-Policy and the usual hardening."""
    return {
        "Content-Security-Policy": csp,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
