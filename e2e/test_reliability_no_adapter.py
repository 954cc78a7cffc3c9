"""The page against a server with no Vulkan driver at all: it still loads, runs the browser and
Pyodide parts, and says why there is no native run (docs/reliability.md)."""

import pytest

from bench.demo import serve
from pagetools import needs_pyodide, wait_for_status


@pytest.fixture(scope="module")
def server_without_adapter(tmp_path_factory):
    needs_pyodide()
    env = {"VK_ICD_FILENAMES": "/nonexistent/icd.json", "WGPU_BACKEND_TYPE": "Vulkan"}
    with serve(tmp_path_factory.mktemp("no-adapter"), env=env) as url:
        yield url


def test_page_says_why_there_is_no_native_run(page, server_without_adapter):
    page.goto(server_without_adapter + "/")
    wait_for_status(page)
    native = page.locator("#native-adapter").inner_text()
    assert native.startswith("unavailable:") and "no usable adapter" in native
    # The browser and Pyodide parts still ran; the native one is reported with its reason.
    text = page.locator("body").inner_text()
    assert "HTTP 503" in text and "no usable adapter" in text
