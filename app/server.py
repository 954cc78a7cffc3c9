"""The FastAPI application: the page, its static files, the WGSL files as they are, Pyodide, the
wgattn wheel the page installs with micropip, and the JSON API."""

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from .api import router
from .paths import PYODIDE, SHADERS, STATIC, TESTS, WHEELS

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

    @app.get("/py/wheel.json", include_in_schema=False)
    def wheel_info():
        """Where the page finds the wheel to install with micropip."""
        path = wheel_path()
        if path is None:
            return JSONResponse(
                {"detail": f"no wgattn wheel in {WHEELS}: run `make setup` (scripts/build_wheel.sh builds it)"},
                status_code=503)
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
                {"detail": f"Pyodide {PYODIDE.name} is not installed in {PYODIDE}: run `make setup`"},
                status_code=503)
    return app
