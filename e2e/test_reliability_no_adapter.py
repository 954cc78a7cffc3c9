"""The page against a server with no Vulkan driver at all: it still loads, runs the browser and
Pyodide parts, and says why there is no native run (docs/reliability.md)."""
import os
import subprocess
import sys
import time
import urllib.request

import pytest

from conftest import ROOT, _free_port, wait_for_status


@pytest.fixture(scope="module")
def server_without_adapter(tmp_path_factory):
    if not (ROOT / ".cache" / "pyodide").is_dir():
        pytest.skip("Pyodide is not installed (.cache/pyodide): run make setup")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("no-adapter") / "server.log", "w")
    env = {**os.environ, "VK_ICD_FILENAMES": "/nonexistent/icd.json", "WGPU_BACKEND_TYPE": "Vulkan"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app:main", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/api/kernels", timeout=2)
            break
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"server did not start; see {log.name}")
            time.sleep(0.2)
    yield url
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def test_page_says_why_there_is_no_native_run(page, server_without_adapter):
    page.goto(server_without_adapter + "/")
    wait_for_status(page)
    native = page.locator("#native-adapter").inner_text()
    assert native.startswith("unavailable:") and "no usable adapter" in native
    # The browser and Pyodide parts still ran; the native one is reported with its reason.
    text = page.locator("body").inner_text()
    assert "HTTP 503" in text and "no usable adapter" in text
