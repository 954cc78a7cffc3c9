"""Talking real HTTP to the demo server that bench/demo.py starts, for the tests of what lives in
connections (the defects of sockets, which TestClient does not have): requests by urllib and by
hand, abandoned runs, the server's descriptors. Import it as `from real_server import ...`
(pytest puts tests/ on the path)."""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from typing import Optional

from bench.demo import Server

__all__ = [
    "SMALL_RUN",
    "SLOW_RUN",
    "post",
    "get",
    "timed_small_run",
    "abandon",
    "open_fds",
    "read_answer",
    "parse_answer",
    "raw",
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
