"""Against a real uvicorn on 127.0.0.1, as `make demo` runs it: load (50 concurrent runs; 200 in
sequence with 10 in flight), every result checked against the float64 reference; a chunked body
over the limit cut off while it arrives; and a server with no Vulkan driver at all.

The latency percentiles are printed (run with -s) and written to reliability-load.json in
pytest's temporary folder; they are reported, never asserted (tests are not gated on speed)."""

import concurrent.futures
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from wgattn import tolerance, wire
from wgattn.interfaces.sdpa_arena import SdpaCase

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log_dir: Path, env=None, name="reliability"):
    """uvicorn app:main on a free port of 127.0.0.1; returns (process, base URL)."""
    port = _free_port()
    log = open(log_dir / f"{name}-server.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "app:main", "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            urllib.request.urlopen(url + "/api/kernels", timeout=2)
            return proc, url
        except OSError:
            if proc.poll() is not None or time.time() > deadline:
                proc.kill()
                raise RuntimeError(f"server did not start; see {log.name}") from None
            time.sleep(0.2)


def stop(proc):
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("reliability")


@pytest.fixture(scope="module")
def server(native_runtime, out_dir):
    proc, url = start_server(out_dir)
    yield url
    stop(proc)


def post(url, body: dict, timeout=60):
    req = urllib.request.Request(url + "/api/run", data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def config(i: int) -> dict:
    """Tiny, varied cases: sizes, masks and seeds differ from one request to the next."""
    mask = ("none", "causal", "window", "padding")[i % 4]
    return {
        "batch": 1 + i % 2,
        "heads": 1 + i % 3,
        "seq_q": 3 + i % 7,
        "seq_k": 4 + i % 11,
        "head_dim": 4 + i % 5,
        "mask": mask,
        "window": i % 3,
        "seed": i,
    }


def timed_run(url, i: int):
    """(seconds, None) when request i came back right, else (seconds, what went wrong)."""
    t0 = time.perf_counter()
    status, body, _ = post(url, {"config": config(i)})
    took = time.perf_counter() - t0
    if status != 200:
        return took, f"request {i}: HTTP {status} {body}"
    case = SdpaCase(**config(i))
    inputs = case.inputs()
    ref = case.reference(inputs)["out"]
    naive = tolerance.max_abs_err(case.reference(inputs, dtype=np.float32)["out"], ref)
    got = wire.decode(body["outputs"]["out"])
    err = tolerance.max_abs_err(got, ref)
    if got.shape != ref.shape or not err <= tolerance.allowance(naive, ref):
        return took, f"request {i}: max abs error {err} over {tolerance.allowance(naive, ref)}"
    return took, None


def percentiles(seconds) -> dict:
    ms = np.asarray(seconds) * 1e3
    return {f"p{q}_ms": round(float(np.percentile(ms, q)), 1) for q in (50, 95, 99)} | {
        "max_ms": round(float(ms.max()), 1),
        "n": len(ms),
    }


def record(out_dir: Path, name: str, figures: dict) -> None:
    path = out_dir / "reliability-load.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    data[name] = figures
    path.write_text(json.dumps(data, indent=1))
    print(f"\n{name}: {figures}")


def test_50_concurrent_runs_all_correct(server, out_dir):
    post(server, {"config": config(0)})  # warm: the first run compiles the pipeline
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(50) as pool:
        results = list(pool.map(lambda i: timed_run(server, i), range(50)))
    wall = time.perf_counter() - t0
    failures = [f for _, f in results if f]
    assert not failures, failures[:5]
    record(out_dir, "50 concurrent", percentiles([t for t, _ in results]) | {"wall_s": round(wall, 2)})


def test_200_in_sequence_10_in_flight_all_correct(server, out_dir):
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda i: timed_run(server, i), range(100, 300)))
    wall = time.perf_counter() - t0
    failures = [f for _, f in results if f]
    assert not failures, failures[:5]
    record(out_dir, "200 with 10 in flight", percentiles([t for t, _ in results]) | {"wall_s": round(wall, 2)})


def test_a_chunked_body_over_the_limit_is_cut_off_while_it_arrives(server):
    """No Content-Length: uvicorn hands the chunks on as they come; the server answers 413 once
    the limit is passed, having read about the limit and not the megabytes still to come."""
    from app import limits

    host, port = server.removeprefix("http://").split(":")
    chunk = b"[" + b"1," * 32767 + b"1]"  # 64 KiB
    sent = 0
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(
            b"POST /api/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        s.settimeout(0.001)
        answer = b""
        try:
            while sent < 4 * limits.MAX_BODY_BYTES:
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                try:
                    answer = s.recv(65536)
                    if answer:
                        break
                except (socket.timeout, BlockingIOError):
                    pass
                except ConnectionResetError:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass
        s.settimeout(10)
        while True:  # the head, then content-length bytes of body
            head, _, body = answer.partition(b"\r\n\r\n")
            length = [int(h.split(b":")[1]) for h in head.lower().split(b"\r\n") if h.startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                break
            try:
                more = s.recv(65536)
            except ConnectionResetError:  # the server closed with our bytes unread: fine
                more = b""
            if not more:
                break
            answer += more
    assert head.startswith(b"HTTP/1.1 413"), head[:200]
    assert b"content-type: application/json" in head.lower() and b"Content Too Large" in body, (head, body)
    # Sent before the answer came: the limit plus what the sockets' buffers hold, not 4x it.
    assert sent < 2 * limits.MAX_BODY_BYTES, sent
    print(f"\nchunked body: 413 after {sent} bytes sent, limit {limits.MAX_BODY_BYTES}")
    # ... and the server is fine afterwards
    took, failure = timed_run(server, 7)
    assert failure is None, failure


def test_server_with_no_vulkan_driver_starts_and_says_why(out_dir):
    """No driver at all (wgpu-py forced to Vulkan, the loader pointed at nothing): the server
    starts, serves the page and the registry, and the API says why there is no native run."""
    proc, url = start_server(
        out_dir, {"VK_ICD_FILENAMES": "/nonexistent/icd.json", "WGPU_BACKEND_TYPE": "Vulkan"}, name="no-adapter"
    )
    try:
        with urllib.request.urlopen(url + "/") as r:
            assert r.status == 200
        for path in ("/api/adapter", "/api/run"):
            req = urllib.request.Request(
                url + path, data=b"{}" if path == "/api/run" else None, headers={"content-type": "application/json"}
            )
            with pytest.raises(urllib.error.HTTPError) as exc:
                urllib.request.urlopen(req, timeout=30)
            assert exc.value.code == 503
            assert int(exc.value.headers["Retry-After"]) >= 1
            assert "no usable adapter" in json.loads(exc.value.read())["detail"]
    finally:
        stop(proc)
