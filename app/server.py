"""The FastAPI application: the page, its static files, the WGSL files as they are, Pyodide, the
wgattn wheel the page installs with micropip, the committed benchmark records, the JSON API and its
documentation (Swagger UI from npm, served here: nothing comes from off the machine); with the
limits, error handlers, security headers and connection bounds of docs/reliability.md.

Responses are gzip'd for clients that accept it (Starlette's GZipMiddleware; Pyodide's big files
as the copies set-up made, app/assets.py). What a URL names by version (Pyodide under its version,
the wheel under its digest, Swagger UI under its version) is cached for a year; the rest is
revalidated on every load, which ETags make a 304.
"""

import hashlib
import json
import os
from contextlib import asynccontextmanager
from typing import Dict, List, Optional, Tuple

import anyio
from fastapi import FastAPI, HTTPException
from fastapi.middleware.gzip import GZipMiddleware
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import FileResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware

from . import errors, limits, records
from .api import router
from .assets import IMMUTABLE, REVALIDATE, Assets, sent_size
from .connections import adopt_server
from .middleware import AbandonedLog, HeadAsGet, ShutdownAnswer
from .native_service import NativeService
from .paths import PYODIDE, PYODIDE_VERSION, ROOT, SHADERS, STATIC, SWAGGER_UI, TESTS, WHEELS
from .security import SecurityHeaders, docs_csp

_NO_CACHE = {"Cache-Control": REVALIDATE}
PYODIDE_URL = f"/pyodide/{PYODIDE_VERSION}/"  # versioned: a new Pyodide is a new URL
PAGE_PACKAGES = ("numpy", "micropip")  # /py/wheel.json's packages when a request names none (the page names its own)
GZIP_MIN_BYTES = 1000  # smaller answers go as they are
GZIP_LEVEL = 6  # zlib's default: most of level 9's gain at a third of its time


def wheel_path():
    """The newest wgattn wheel that scripts/build_wheel.sh built, or None."""
    wheels = sorted(WHEELS.glob("wgattn-*-py3-none-any.whl"), key=lambda p: p.stat().st_mtime)
    return wheels[-1] if wheels else None


_digests: Dict[Tuple[str, int, int], str] = {}


def wheel_digest(path) -> str:
    """The first 16 hex digits of the wheel's sha256: its URL's version (a rebuilt wheel keeps its
    name, not its digest)."""
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _digests:
        _digests.clear()  # one wheel at a time: the last built
        _digests[key] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return _digests[key]


def pyodide_files(packages: List[str]) -> List[Dict[str, object]]:
    """What loading Pyodide with `packages` fetches, in order, with the bytes a client that
    accepts gzip receives: the runtime, its package index, and each package with its
    dependencies (Pyodide 0.17's packages.json). ValueError for a package it does not have."""
    deps = json.loads((PYODIDE / "packages.json").read_text())["dependencies"]
    unknown = [p for p in packages if p not in deps]
    if unknown:
        raise ValueError(f"packages must be among Pyodide {PYODIDE_VERSION}'s {sorted(deps)}, got {unknown}")
    seen: List[str] = []
    todo = list(packages)
    while todo:
        name = todo.pop(0)
        if name not in seen:
            seen.append(name)
            todo.extend(deps[name])
    names = ["pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "pyodide.asm.data", "packages.json"]
    names += [f"{n}.{ext}" for n in seen for ext in ("js", "data")]
    return [{"url": PYODIDE_URL + n, "bytes": sent_size(PYODIDE / n)} for n in names if (PYODIDE / n).is_file()]


def swagger_version() -> Optional[str]:
    """The version of Swagger UI that set-up installed (node_modules), or None."""
    try:
        return str(json.loads((SWAGGER_UI / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return None


def selftest_files():
    """What the in-page test run needs beside the installed package: the reference's tests and
    docs/contract.md, whose drawings they check (tests are not part of the wheel)."""
    paths = sorted(TESTS.glob("test_reference*.py")) + [TESTS.parent / "docs" / "contract.md"]
    return {str(p.relative_to(TESTS.parent)): p.read_text() for p in paths}


def _relative(path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return path.name


class App(FastAPI):
    """FastAPI that, as it starts under uvicorn, gives uvicorn the connection bounds of
    app/connections.py: its lifespan's first call is the one moment the app holds uvicorn's
    `receive`, before FastAPI wraps it."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            adopt_server(receive)
        await super().__call__(scope, receive, send)


@asynccontextmanager
async def _lifespan(app: FastAPI):
    yield
    # Bounded: queued runs are dropped, a running one is asked to stop (native_service).
    await run_in_threadpool(app.state.native.close)


def create_app() -> FastAPI:
    # /docs is served below from the app's own copy of Swagger UI; ReDoc would come from a CDN.
    app = App(
        title="wgattn",
        summary="WGSL attention kernels, checked across runtimes",
        lifespan=_lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.native = NativeService()
    app.state.drawing = anyio.CapacityLimiter(os.cpu_count() or 1)  # api._prepared
    errors.install(app)
    # Outermost last: the security headers go on every response, the Host check's included.
    # Compression innermost: the others see the response as it goes out.
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES, compresslevel=GZIP_LEVEL)
    app.add_middleware(limits.BodyLimit)
    app.add_middleware(HeadAsGet)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=limits.ALLOWED_HOSTS)
    app.add_middleware(AbandonedLog)
    app.add_middleware(ShutdownAnswer)
    app.add_middleware(SecurityHeaders)
    app.include_router(router)
    app.include_router(records.router)

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html", headers=_NO_CACHE)

    @app.get("/selftest", include_in_schema=False)
    def selftest():
        """The reference's pytest suite, run in the page under Pyodide."""
        return FileResponse(STATIC / "selftest.html", headers=_NO_CACHE)

    @app.get("/py/wheel.json", include_in_schema=False)
    def wheel_info(packages: str = ",".join(PAGE_PACKAGES)):
        """What the page loads to run Python: where Pyodide is, the wgattn wheel to install with
        micropip, and the files loading Pyodide with `packages` (comma-separated) fetches with
        their sizes (the page shows its progress in bytes)."""
        path = wheel_path()
        if path is None:
            return JSONResponse(
                {"detail": f"no wgattn wheel in {_relative(WHEELS)}: run `make setup` (scripts/build_wheel.sh builds it)"},
                status_code=503,
            )
        if not PYODIDE.is_dir():
            return _no_pyodide()
        try:
            files = pyodide_files([p.strip() for p in packages.split(",") if p.strip()])
        except ValueError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from None
        url = f"/py/{wheel_digest(path)}/{path.name}"
        files.append({"url": url, "bytes": path.stat().st_size})
        body = {"url": url, "name": path.name, "pyodide": PYODIDE_URL, "files": files}
        return JSONResponse(body, headers=_NO_CACHE)

    @app.get("/py/{digest}/{name}.whl", include_in_schema=False)
    def wheel(digest: str, name: str):
        """The wheel, under its digest: cached for good (a rebuilt wheel has another URL)."""
        path = wheel_path()
        if path is None or path.name != f"{name}.whl" or wheel_digest(path) != digest:
            raise HTTPException(status_code=404, detail=f"no wheel {digest}/{name}.whl; GET /py/wheel.json names it")
        return FileResponse(path, media_type="application/zip", headers={"Cache-Control": IMMUTABLE})

    @app.get("/py/selftest.json", include_in_schema=False)
    def selftest_bundle():
        return JSONResponse({"files": selftest_files()}, headers=_NO_CACHE)

    swagger = swagger_version()

    @app.get("/docs", include_in_schema=False)
    def docs():
        """The API's documentation: FastAPI's Swagger UI page with Swagger UI's files from npm,
        served below; its one inline script is allowed by its hash (app/security.py)."""
        if swagger is None:
            return JSONResponse(
                {"detail": f"Swagger UI is not installed in {_relative(SWAGGER_UI)}: run `make setup` (npm ci)"},
                status_code=503,
            )
        base = f"/vendor/swagger-ui/{swagger}"
        page = get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title}: API",
            swagger_js_url=f"{base}/swagger-ui-bundle.js",
            swagger_css_url=f"{base}/swagger-ui.css",
            swagger_favicon_url="data:,",
        )
        page.headers["Content-Security-Policy"] = docs_csp(page.body.decode())
        page.headers["Cache-Control"] = REVALIDATE
        return page

    app.mount("/static", Assets(directory=STATIC, cache_control=REVALIDATE), name="static")
    app.mount("/shaders", Assets(directory=SHADERS, cache_control=REVALIDATE), name="shaders")
    if swagger is not None:
        app.mount(f"/vendor/swagger-ui/{swagger}", Assets(directory=SWAGGER_UI, cache_control=IMMUTABLE), name="swagger-ui")
    if PYODIDE.is_dir():
        app.mount(PYODIDE_URL.rstrip("/"), Assets(directory=PYODIDE, cache_control=IMMUTABLE), name="pyodide")
    else:

        @app.get("/pyodide/{path:path}", include_in_schema=False)
        def no_pyodide(path: str):
            return _no_pyodide()

    return app


def _no_pyodide() -> JSONResponse:
    # The repo-relative folder: error bodies carry no absolute paths.
    detail = f"Pyodide {PYODIDE.name} is not installed in {_relative(PYODIDE)}: run `make setup`"
    return JSONResponse({"detail": detail}, status_code=503)
