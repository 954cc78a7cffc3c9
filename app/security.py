"""Security headers on every response.

The page loads nothing off the machine: its scripts, styles, Pyodide (its .js, .wasm and package
files) and data all come from this server, so the Content-Security-Policy allows 'self' only, plus:
- 'wasm-unsafe-eval': Pyodide compiles its WebAssembly (CSP level 3's name for exactly that);
- 'unsafe-eval': Pyodide 0.17 converts Python objects to JavaScript with eval(); without it the
  demo stops with "pyodide.ConversionError: Conversion from python to javascript failed"
  (checked in headless Chromium; Playwright's string wait_for_function needs it too);
- img-src data: for the page's empty favicon (`<link rel="icon" href="data:,">`).
The API's documentation (/docs) is FastAPI's Swagger UI page, its files served by this server too:
its route sets `docs_csp`, the same policy with its one inline script (Swagger UI's set-up)
allowed by that script's hash, and no eval.
"""

import base64
import hashlib
import re

from starlette.datastructures import MutableHeaders

__all__ = ["PAGE_CSP", "docs_csp", "headers_for", "SecurityHeaders"]


def _policy(scripts: str) -> str:
    """The server's Content-Security-Policy with `scripts` as its script-src."""
    return "; ".join(
        [
            "default-src 'self'",
            f"script-src {scripts}",
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


PAGE_CSP = _policy("'self' 'wasm-unsafe-eval' 'unsafe-eval'")
_INLINE_SCRIPT = re.compile(r"<script>(.*?)</script>", re.S)


def docs_csp(html: str) -> str:
    """The policy of a page of this server with inline scripts (the API's Swagger UI page): the
    page's own, each inline script of `html` allowed by its sha256, no eval."""
    hashes = " ".join(
        "'sha256-%s'" % base64.b64encode(hashlib.sha256(m.group(1).encode()).digest()).decode()
        for m in _INLINE_SCRIPT.finditer(html)
    )
    return _policy(f"'self' {hashes}".rstrip())


_COMMON = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def headers_for(path: str) -> dict:
    """The security headers of a response to `path` (a route may set its own policy: docs_csp)."""
    return {**_COMMON, "Content-Security-Policy": PAGE_CSP}


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
