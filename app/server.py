"""The FastAPI application: the page, its static files, the WGSL files as they are, Pyodide and
the Python the page imports, and the JSON API."""

from fastapi import FastAPI
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from .api import router
from .paths import PY, PYODIDE, SHADERS, STATIC, TESTS


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


def create_app() -> FastAPI:
    app = FastAPI(title="wgattn", summary="WGSL attention kernels, checked across runtimes")
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
                {"detail": f"Pyodide {PYODIDE.name} is not installed in {PYODIDE}: run `make setup`"},
                status_code=503)
    return app
