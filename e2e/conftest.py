"""End-to-end fixtures: the real server (uvicorn on 127.0.0.1) and Debian's headless Chromium
driven by Playwright (pytest-playwright's fixtures, pointed at /usr/bin/chromium)."""

import os

import pytest

from bench.demo import CHROMIUM, CHROMIUM_ARGS, ROOT, serve
from pagetools import needs_pyodide


def pytest_collection_modifyitems(items):
    for item in items:
        if "e2e" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"no Chromium at {CHROMIUM} (make setup installs Debian's chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": CHROMIUM_ARGS}


@pytest.fixture(scope="session")
def server():
    """The demo server on a free port (its log: .cache/e2e-server.log); yields its base URL."""
    needs_pyodide()
    with serve(ROOT / ".cache", name="e2e") as url:
        yield url


@pytest.fixture
def console_errors(page):
    """Console errors and uncaught exceptions of the page, collected for the test to assert on."""
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    return errors
