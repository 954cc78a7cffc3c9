"""`uvicorn app:main` as `make demo` starts it, for the tests and bench/ scripts that talk real HTTP
to a real server (the defects of connections live there, not in TestClient). Import it as
`from real_server import ...` (tests/ is on sys.path for pytest; bench scripts add it)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

__all__ = [
    "ROOT",
    "SMALL_RUN",
    "SLOW_RUN",
    "Server",
    "start",
    "post",
    "get",
    "timed_small_run",
    "abandon",
    "rss_mib",
    "open_fds",
    "read_answer",
    "parse_answer",
    "raw",
    "server_arguments",
    "log_folder",
]

# A valid run that takes milliseconds on lavapipe: what "the server still answers" means.
SMALL_RUN = {
    "kernel": "sdpa_arena.seed",
    "config": {"batch": 1, "heads": 1, "seq_q": 8, "seq_k": 8, "head_dim": 8, "mask": "none"},
}
# One dispatch at the score limit (wgattn.cases.MAX_SCORES): seconds on lavapipe, and a dispatch
# cannot be stopped half way.
SLOW_RUN = {
    "kernel": "sdpa_arena.seed",
    "config": {"batch": 1, "heads": 16, "seq_q": 1024, "seq_k": 1024, "head_dim": 64, "mask": "none"},
}

ROOT = Path(__file__).resolve().parent.parent


_WITH_NOFILE = (
    "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, ({0}, {0})); "
    "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    log_dir: Path, env: Optional[dict] = None, name: str = "server", nofile: Optional[int] = None, root: Optional[Path] = None
) -> Server:
    """uvicorn app:main on a free port of 127.0.0.1 (with `env` added to the environment, and a
    file-descriptor limit of `nofile` if given); returns once it answers. `root`: serve another
    checkout (its app/ and py/), e.g. to measure main beside a change."""
    port = _free_port()
    log_path = Path(log_dir) / f"{name}-server.log"
    log = open(log_path, "w")

    command = [sys.executable, "-m", "uvicorn", "app:main", "--host", "127.0.0.1", "--port", str(port)]
    if nofile is not None:  # set in the child before it execs uvicorn (no preexec_fn: a fork of this process)
        command[1:1] = ["-c", _WITH_NOFILE.format(nofile)]
    proc = subprocess.Popen(
        command,
        cwd=root or ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **({"PYTHONPATH": str(Path(root) / "py")} if root else {}), **(env or {})},
    )
    log.close()
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


def post(url: str, body: dict, timeout: float = 60, path: str = "/api/run"):
    """(status, JSON body, headers with lower-case names) of a POST of `body` as JSON."""
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null"), {k.lower(): v for k, v in e.headers.items()}


def get(url: str, path: str, timeout: float = 30, method: str = "GET", headers: Optional[dict] = None):
    """(status, body bytes, headers with lower-case names) of a GET (or `method`) of `path`."""
    req = urllib.request.Request(url + path, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(), {k.lower(): v for k, v in r.headers.items()}
    except urllib.error.HTTPError as e:
        return e.code, e.read(), {k.lower(): v for k, v in e.headers.items()}


def timed_small_run(url: str, timeout: float = 30):
    """(HTTP status or the client's error, seconds) of SMALL_RUN."""
    t0 = time.monotonic()
    try:
        status = post(url, SMALL_RUN, timeout=timeout)[0]
    except OSError as exc:
        status = type(exc).__name__
    return status, time.monotonic() - t0


def abandon(server: Server, body: dict, runs: int, after: float) -> None:
    """Send `runs` requests of `body` at once, then hang up on each `after` seconds later."""
    request = raw(body)
    socks = [server.connect() for _ in range(runs)]
    for s in socks:
        s.sendall(request)
    time.sleep(after)
    for s in socks:
        s.close()


def open_fds(pid: int) -> int:
    """File descriptors process `pid` has open (Linux)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mib(pid: int) -> float:
    """Resident memory of process `pid`, MiB (Linux)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def raw(body: dict, path: str = "/api/run", host: str = "localhost") -> bytes:
    """A whole HTTP/1.1 POST of `body` as JSON, as bytes for a socket."""
    data = json.dumps(body).encode()
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )


def read_answer(sock: socket.socket, timeout: float = 10):
    """(seconds until the server closed or answered in full, the bytes it sent; b"" when it
    closed without a word). A reset counts as closed."""
    sock.settimeout(timeout)
    t0 = time.monotonic()
    got = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        except socket.timeout:
            raise TimeoutError(f"no answer and still open after {timeout} s (got {got[:200]!r})") from None
        if not chunk:
            break
        got += chunk
        head, sep, body = got.partition(b"\r\n\r\n")
        lengths = [int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length:")]
        if sep and lengths and len(body) >= lengths[0]:
            break
    return time.monotonic() - t0, got


def parse_answer(data: bytes):
    """(status, headers with lower-case names, body bytes) of one HTTP/1.1 response."""
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def server_arguments(ap: argparse.ArgumentParser) -> None:
    """The bench scripts' --root (serve another checkout) and --log-dir (keep the server's log)."""
    ap.add_argument("--root", type=Path, help="serve another checkout (e.g. main, to compare)")
    ap.add_argument("--log-dir", type=Path, help="keep the server's log here (default: a temporary folder)")


@contextlib.contextmanager
def log_folder(path: Optional[Path]):
    """`path` (created), or a temporary folder removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
