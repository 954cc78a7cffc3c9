"""Security headers on every response.

The page loads nothing off the machine: its scripts, styles, Pyodide (its .js, .wasm and package
files) and data all come from this server, so the Content-Security-Policy allows 'self' only, plus:
- 'wasm-unsafe-eval': Pyodide compiles its WebAssembly (CSP level 3's name for exactly that);
- 'unsafe-eval': Pyodide 0.17 converts Python objects to JavaScript with eval(); without it the
  demo stops with "pyodide.ConversionError: Conversion from python to javascript failed"
  (checked in headless Chromium; Playwright's string wait_for_function needs it too);
- img-src data: for the page's empty favicon (`<link rel="icon" href="data:,">`).
FastAPI's own API pages (/docs, /redoc) are the exception: they are made of Swagger UI and ReDoc
from a CDN and an inline script, so they get a policy naming those and nothing else.
"""

from starlette.datastructures import MutableHeaders

__all__ = ["PAGE_CSP", "DOCS_CSP", "headers_for", "SecurityHeaders"]

PAGE_CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self' 'wasm-unsafe-eval' 'unsafe-eval'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

_CDN = "https://cdn.jsdelivr.net"
DOCS_CSP = "; ".join(
    [
        "default-src 'self'",
        f"script-src 'self' 'unsafe-inline' {_CDN}",
        f"style-src 'self' 'unsafe-inline' {_CDN} https://fonts.googleapis.com",
        "font-src 'self' https://fonts.gstatic.com",
        "img-src 'self' data: https://fastapi.tiangolo.com https://cdn.redoc.ly",
        "worker-src 'self' blob:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    ]
)
DOCS_PATHS = ("/docs", "/docs/oauth2-redirect", "/redoc")

_COMMON = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def headers_for(path: str) -> dict:
    """The security headers of a response to `path`."""
    return {**_COMMON, "Content-Security-Policy": DOCS_CSP if path in DOCS_PATHS else PAGE_CSP}


class SecurityHeaders:
    """ASGI middleware: adds `headers_for(path)` to every HTTP response (keeping any the route set)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = headers_for(scope.get("path", ""))

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in extra.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, send_with_headers)
