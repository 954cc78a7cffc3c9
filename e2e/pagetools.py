"""What the end-to-end tests share besides fixtures: the Chromium they drive, the demo server as
`make demo` starts it, and waits on the page's state. The fixtures (conftest.py) build on these;
tests and bench/suite.py import them from here, never from a conftest (the suite runs where
pytest may be missing: it is imported only to skip a test)."""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("WGATTN_CHROMIUM", "/usr/bin/chromium")
# WebGPU needs --enable-unsafe-webgpu on Linux; no GPU here, so Chromium uses SwiftShader.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--disable-gpu-watchdog",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(log_path: Path, env=None):
    """The demo server exactly as `make demo` starts it (with `env` if given), on a free port;
    yields its base URL and stops it afterwards."""
    if not (ROOT / ".cache" / "pyodide").is_dir():
        import pytest

        pytest.skip("Pyodide is not installed (.cache/pyodide): run make setup")
    # The page installs the wgattn wheel: build it from these sources (a no-op when up to date).
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_wheel.sh")], cwd=ROOT, check=True, env={**os.environ, "PYTHON": sys.executable}
    )
    port = _free_port()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "app:main", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/api/kernels", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    proc.kill()
                    raise RuntimeError(f"server did not start; see {log.name}") from None
                time.sleep(0.2)
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def wait_for_status(page, timeout_s: float = 180) -> str:
    page.wait_for_function("['done', 'error'].includes(document.body.dataset.status)", timeout=timeout_s * 1000)
    return page.evaluate("document.body.dataset.status")


def in_progress(page) -> dict:
    """What the page's wgattn.page.PageSession holds besides the finished runs it keeps for their
    pictures: {kind: count}, every count 0 when the page has nothing in progress. Waits for the
    precision probe that the page starts on load first (it holds a run while it runs)."""
    page.wait_for_function("['done', 'error'].includes(document.getElementById('precision')?.dataset.status)", timeout=120_000)
    held = json.loads(page.evaluate("window.wgattn.ctx.page.stats()"))
    assert 0 <= held.pop("finished") <= 16
    return {kind: n for kind, n in held.items() if n}
