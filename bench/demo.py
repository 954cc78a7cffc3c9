"""The demo as `make demo` serves it (`uvicorn app:main`, no flags) on a free port of 127.0.0.1,
and the flags that open its page in Chromium with WebGPU, headless: what the benchmark suite, the
e2e tests and the tests that talk real HTTP (tests/real_server.py) share. Nothing here needs
pytest or Playwright: the suite runs where neither is installed."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, Iterator, Optional

__all__ = ["ROOT", "CHROMIUM", "CHROMIUM_ARGS", "Server", "start", "serve", "rss_mib"]

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("WGATTN_CHROMIUM", "/usr/bin/chromium")
# WebGPU needs --enable-unsafe-webgpu on Linux; without a GPU Chromium uses SwiftShader.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--enable-unsafe-webgpu",
    "--disable-gpu-watchdog",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# Sets the file-descriptor limit in the child before it execs uvicorn (no preexec_fn: that runs
# in a fork of this process, threads and all).
_WITH_NOFILE = (
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({0}, {0})); "
    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid`, MiB (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


class Server:
    """A running server: its process, base URL and log file."""

    def __init__(self, proc: subprocess.Popen, url: str, log: Path):
        self.proc, self.url, self.log = proc, url, log
        self.host, port = url.removeprefix("http://").split(":")
        self.port = int(port)

    def connect(self, timeout: float = 10) -> socket.socket:
        return socket.create_connection((self.host, self.port), timeout=timeout)

    def rss_mib(self) -> float:
        return rss_mib(self.proc.pid)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, timeout: float = 30) -> float:
        """SIGTERM, then wait; the seconds it took to exit (it is killed after `timeout`)."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return time.monotonic() - t0

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start(
    log_dir: Path,
    env: Optional[Dict[str, str]] = None,
    name: str = "server",
    nofile: Optional[int] = None,
    root: Optional[Path] = None,
) -> Server:
    """uvicorn app:main on a free port of 127.0.0.1, logging to log_dir/<name>-server.log, with
    `env` added to this process's environment (and a file-descriptor limit of `nofile` if given);
    returns once it answers. `root`: serve another checkout (its app/ and py/), e.g. to measure
    main beside a change."""
    port = _free_port()
    log_path = Path(log_dir) / f"{name}-server.log"
    command = [sys.executable, "-m", "uvicorn", "app:main", "--host", "127.0.0.1", "--port", str(port)]
    if nofile is not None:
        command[1:1] = ["-c", _WITH_NOFILE.format(nofile)]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            command,
            cwd=root or ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **({"PYTHONPATH": str(Path(root) / "py")} if root else {}), **(env or {})},
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/api/kernels", timeout=2)
            return Server(proc, url, log_path)
        except urllib.error.HTTPError:  # it answers (its Host check may refuse 127.0.0.1)
            return Server(proc, url, log_path)
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"server did not start; see {log_path}") from None
            time.sleep(0.2)


@contextlib.contextmanager
def serve(log_dir: Path, env: Optional[Dict[str, str]] = None, name: str = "demo") -> Iterator[str]:
    """The demo for a browser: the wgattn wheel its page installs built from these sources (a
    no-op when up to date), then `start`; yields the base URL and stops the server afterwards.
    The page also needs Pyodide in .cache/pyodide (`make setup`): callers check, and say so."""
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "build_wheel.sh")], cwd=ROOT, check=True, env={**os.environ, "PYTHON": sys.executable}
    )
    with start(log_dir, env, name) as server:
        yield server.url
