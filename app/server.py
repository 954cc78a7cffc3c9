"""The FastAPI application: the page, its static files, the WGSL files as they are, Pyodide, the
wgattn wheel the page installs with micropip, and the JSON API; with the limits, error handlers,
security headers and connection bounds of docs/reliability.md."""

import os
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool
from starlette.middleware.trustedhost import TrustedHostMiddleware

from . import errors, limits
from .api import router
from .connections import adopt_server
from .middleware import AbandonedLog, HeadAsGet, ShutdownAnswer
from .native_service import NativeService
from .paths import PYODIDE, ROOT, SHADERS, STATIC, TESTS, WHEELS
from .security import SecurityHeaders

# Revalidate on every load (ETag / Last-Modified make that cheap): a rebuilt wheel keeps its name.
_NO_CACHE = {"Cache-Control": "no-cache"}


def wheel_path():
    """The newest wgattn wheel that scripts/build_wheel.sh built, or None."""
    wheels = sorted(WHEELS.glob("wgattn-*-py3-none-any.whl"), key=lambda p: p.stat().st_mtime)
    return wheels[-1] if wheels else None


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
    app.state.native.start()  # the start-up compiles, in the background (WGATTN_WARMUP)
    yield
    # Bounded: queued runs are dropped, a running one is asked to stop (native_service).
    await run_in_threadpool(app.state.native.close)


def create_app() -> FastAPI:
    app = App(title="wgattn", summary="WGSL attention kernels, checked across runtimes", lifespan=_lifespan)
    app.state.native = NativeService()
    app.state.drawing = anyio.CapacityLimiter(os.cpu_count() or 1)  # api._prepared
    errors.install(app)
    # Outermost last: the security headers go on every response, the Host check's included.
    app.add_middleware(limits.BodyLimit)
    app.add_middleware(HeadAsGet)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=limits.ALLOWED_HOSTS)
    app.add_middleware(AbandonedLog)
    app.add_middleware(ShutdownAnswer)
    app.add_middleware(SecurityHeaders)
    app.include_router(router)

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html")

    @app.get("/selftest", include_in_schema=False)
    def selftest():
        """The reference's pytest suite, run in the page under Pyodide."""
        return FileResponse(STATIC / "selftest.html")

    @app.get("/py/wheel.json", include_in_schema=False)
    def wheel_info():
        """Where the page finds the wheel to install with micropip."""
        path = wheel_path()
        if path is None:
            return JSONResponse(
                {"detail": f"no wgattn wheel in {_relative(WHEELS)}: run `make setup` (scripts/build_wheel.sh builds it)"},
                status_code=503,
            )
        return JSONResponse({"url": f"/py/{path.name}", "name": path.name}, headers=_NO_CACHE)

    @app.get("/py/{name}.whl", include_in_schema=False)
    def wheel(name: str):
        path = wheel_path()
        if path is None or path.name != f"{name}.whl":
            raise HTTPException(status_code=404, detail=f"no wheel {name}.whl; GET /py/wheel.json names it")
        return FileResponse(path, media_type="application/zip", headers=_NO_CACHE)

    @app.get("/py/selftest.json", include_in_schema=False)
    def selftest_bundle():
        return JSONResponse({"files": selftest_files()}, headers=_NO_CACHE)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    app.mount("/shaders", StaticFiles(directory=SHADERS), name="shaders")
    if PYODIDE.is_dir():
        app.mount("/pyodide", StaticFiles(directory=PYODIDE), name="pyodide")
    else:

        @app.get("/pyodide/{path:path}", include_in_schema=False)
        def no_pyodide(path: str):
            return JSONResponse(
                # The repo-relative folder: error bodies carry no absolute paths.
                {"detail": f"Pyodide {PYODIDE.name} is not installed in {_relative(PYODIDE)}: run `make setup`"},
                status_code=503,
            )

    return app
