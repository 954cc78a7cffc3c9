"""The FastAPI application: the page, its static files, the WGSL files as they are, Pyodide and
the Python the page imports, and the JSON API; with the limits, error handlers and security
headers of docs/reliability.md."""
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from . import errors, limits
from .api import router
from .paths import PY, PYODIDE, ROOT, SHADERS, STATIC, TESTS
from .security import SecurityHeaders


def python_bundle(tests: bool = False):
    """The files the page writes into Pyodide's file system, keyed by repo-relative path: the
    wgattn package, the shaders (the package reads manifest.json and .wgsl from there) and, for
    the in-page test run, the reference tests (and docs/contract.md, whose drawings they check)."""
    files = {}
    for path in sorted((PY / "wgattn").rglob("*.py")):
        files[str(path.relative_to(PY.parent))] = path.read_text()
    for path in sorted(SHADERS.rglob("*")):  # lib/ holds the snippets kernels #include
        if path.suffix in (".wgsl", ".json"):
            files[str(path.relative_to(SHADERS.parent))] = path.read_text()
    if tests:
        for path in sorted(TESTS.glob("test_reference*.py")) + [TESTS.parent / "docs" / "contract.md"]:
            files[str(path.relative_to(TESTS.parent))] = path.read_text()
    return files


def _relative(path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return path.name


@asynccontextmanager
async def _lifespan(app: FastAPI):
    # Room in the thread pool for every admitted native run on top of the default (limits.py).
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = max(limiter.total_tokens, limits.THREADS)
    yield


def create_app() -> FastAPI:
    app = FastAPI(title="wgattn", summary="WGSL attention kernels, checked across runtimes", lifespan=_lifespan)
    errors.install(app)
    app.add_middleware(limits.BodyLimit)
    app.add_middleware(SecurityHeaders)  # added last: outermost, so on every response
    app.include_router(router)

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html")

    @app.get("/selftest", include_in_schema=False)
    def selftest():
        """The reference's pytest suite, run in the page under Pyodide."""
        return FileResponse(STATIC / "selftest.html")

    @app.get("/py/bundle.json", include_in_schema=False)
    def bundle(tests: bool = False):
        return JSONResponse({"files": python_bundle(tests)})

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
                status_code=503)
    return app
