"""New shapes against cached runs: does one client that keeps sending shapes never seen before (each
a pipeline compile: seconds to a minute on lavapipe) hold up other clients' small runs whose
pipelines are compiled? Against `uvicorn app:main` (as `make demo` starts it, its start-up
compiles off, Mesa's shader cache a fresh folder so that every new shape really compiles):

1. `--baseline` small runs (sdpa_arena.seed, 8x8x8) from client B alone: the unloaded times;
2. for `--seconds`, client A (127.0.0.1) sends new shapes one after another (paged_decode.split,
   flash_fwd.tiled, varlen_bwd.tiled and paged_prefill.tiled, a new head_dim each, `--inflight`
   at once), while
   clients B and C (127.0.0.2, 127.0.0.3: other addresses, so other clients to the server) send
   the small run in turn, each timed;
3. `--abandon` times, a new decode shape from client A that hangs up after 0.5 s, then a small
   run from B, timed.

With `--warmup`, instead: the server's start-up compiles on (WGATTN_WARMUP=1, Mesa's cache
empty), the first small run timed as soon as the server answers, then one every 0.5 s until the
start-up compiles are done (or `--seconds` pass): how long they take, and whether they hold up
anyone.

With `--timeout S`, instead: the server's run timeout at S seconds (WGATTN_RUN_TIMEOUT_S), a new
decode shape sent once (504 at the limit while it compiles), then, once the compile is done, the
same shape again: does it run on the kept pipelines (no cache miss), and does a small run still
find its own (the runtime kept)?

    .venv/bin/python -m lab.server_load.compile_stall --seconds 90 [--inflight 2] [--root ../main]
    .venv/bin/python -m lab.server_load.compile_stall --warmup --seconds 3600 [--mesa-cache DIR]
    .venv/bin/python -m lab.server_load.compile_stall --timeout 5

Prints `uptime`'s load averages before and after, and a JSON summary (`--json`: appended as one
line with them and the commit): the small runs' unloaded and loaded p50, p99 and max (ms), A's
requests by status and the compile seconds the server reports (GET /api/health's compiles), the
abandoned compiles' fate and the small run after each.
A measurement, not a test (tests/test_reliability_compiles.py checks the same deterministically).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import List, Optional

import numpy as np

from bench.demo import Server, start
from lab.server_load.options import QUIET, log_folder, server_arguments
from tests.real_server import SMALL_RUN, get, raw
from wgattn.bench import git_commit

CLIENTS = {"A": "127.0.0.1", "B": "127.0.0.2", "C": "127.0.0.3"}


def post_from(server: Server, source: str, body: dict, timeout: float = 600):
    """(status, JSON body) of POST /api/run from the address `source` (another client to the server)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout, source_address=(source, 0))
    try:
        conn.request("POST", "/api/run", json.dumps(body), {"content-type": "application/json", "host": "localhost"})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def timed_small(server: Server, source: str) -> float:
    t0 = time.monotonic()
    status, body = post_from(server, source, SMALL_RUN)
    if status != 200:
        raise SystemExit(f"the small run answered {status}: {body[:300]!r}")
    return time.monotonic() - t0


def new_shape(i: int) -> dict:
    """Request i of client A: a shape no earlier request had (a head_dim each, kernels in turn)."""
    kernel, config = [
        ("paged_decode.split", {"batch": 1, "heads": 2, "heads_kv": 1, "seq_len": 40, "block_size": 16}),
        ("flash_fwd.tiled", {"batch": 1, "heads": 1, "seq_q": 8, "seq_k": 8}),
        ("varlen_bwd.tiled", {"batch": 1, "heads": 1, "seq_q": 8, "seq_k": 8}),
        ("paged_prefill.tiled", {"batch": 1, "heads": 2, "heads_kv": 1, "seq_len": 40, "new_tokens": 20, "block_size": 16}),
    ][i % 4]
    return {"kernel": kernel, "config": dict(config, head_dim=9 + i)}  # 9, 10, ...: classes not compiled yet


def percentiles(seconds: List[float]) -> dict:
    ms = np.array(seconds) * 1e3
    return {
        "n": int(ms.size),
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "max_ms": round(float(ms.max()), 1),
    }


def health(server: Server) -> dict:
    return json.loads(get(server.url, "/api/health")[1])


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def measure(seconds: float, inflight: int, baseline: int, abandons: int, log_dir: Path, root=None) -> dict:
    cache = tempfile.mkdtemp(prefix="mesa-cache-")
    env = dict(QUIET, MESA_SHADER_CACHE_DIR=cache)
    with start(log_dir, env, name="compile-stall", root=root) as server:
        timed_small(server, CLIENTS["B"])  # compiles the small run's pipeline
        unloaded = [timed_small(server, CLIENTS["B"]) for _ in range(baseline)]
        statuses: Counter = Counter()
        stop = time.monotonic() + seconds
        counter = iter(range(10**6))
        lock = threading.Lock()

        def hostile():
            while time.monotonic() < stop:
                with lock:
                    i = next(counter)
                status, _ = post_from(server, CLIENTS["A"], new_shape(i))
                statuses[status] += 1

        loaded: List[float] = []

        def polite(source: str):
            while time.monotonic() < stop:
                loaded.append(timed_small(server, source))
                time.sleep(0.05)

        threads = [threading.Thread(target=hostile) for _ in range(inflight)]
        threads += [threading.Thread(target=polite, args=(CLIENTS[c],)) for c in "BC"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        during = health(server)
        abandoned = []
        for j in range(abandons):
            body = {"kernel": "paged_decode.split", "config": {"batch": 1, "heads": 2, "seq_len": 40, "head_dim": 200 + j}}
            s = socket.create_connection((server.host, server.port), source_address=(CLIENTS["A"], 0))
            s.sendall(raw(body))
            time.sleep(0.5)
            s.close()
            t_small = timed_small(server, CLIENTS["B"])
            abandoned.append({"small_run_after_ms": round(t_small * 1e3, 1)})
        time.sleep(1)
        after = health(server)
    return {
        "seconds": seconds,
        "inflight": inflight,
        "small_run_unloaded": percentiles(unloaded),
        "small_run_while_new_shapes": percentiles(loaded),
        "p99_excess_ms": round((np.percentile(loaded, 99) - np.percentile(unloaded, 99)) * 1e3, 1),
        "new_shape_requests": {str(k): v for k, v in statuses.items()},
        "compiles_during": {k: during["compiles"][k] for k in ("finished", "dropped", "failed")},
        "latest_compile_s": during["compiles"]["latest"],
        "abandoned": abandoned,
        "compiles_after_abandons": {k: after["compiles"][k] for k in ("queued", "running", "finished", "dropped")},
        "requests_abandoned": after["requests"]["abandoned"],
    }


def warmup(seconds: float, log_dir: Path, root=None, cache: Optional[Path] = None) -> dict:
    env = {"WGATTN_WARMUP": "1", "MESA_SHADER_CACHE_DIR": str(cache or tempfile.mkdtemp(prefix="mesa-cache-"))}
    t0 = time.monotonic()
    with start(log_dir, env, name="warmup", root=root) as server:
        first = timed_small(server, CLIENTS["B"])
        runs: List[float] = []
        state = health(server)["warmup"]
        while not state["done"] and time.monotonic() - t0 < seconds:
            runs.append(timed_small(server, CLIENTS["B"]))
            time.sleep(0.5)
            state = health(server)["warmup"]
        took = time.monotonic() - t0
        end = health(server)
        rss = server.rss_mib()
    return {
        "first_small_run_ms": round(first * 1e3, 1),
        "small_runs_during": percentiles(runs) if runs else None,
        "warmup": state,
        "warmup_s": round(took, 1),
        "pipelines": end["pipelines"],
        "rss_mib": round(rss, 1),
    }


def timeout_keeps(limit: float, log_dir: Path, root=None) -> dict:
    env = dict(QUIET, MESA_SHADER_CACHE_DIR=tempfile.mkdtemp(prefix="mesa-cache-"), WGATTN_RUN_TIMEOUT_S=str(limit))
    shape = {"kernel": "paged_decode.split", "config": {"batch": 1, "heads": 2, "heads_kv": 1, "seq_len": 40, "head_dim": 100}}
    with start(log_dir, env, name="compile-timeout", root=root) as server:
        timed_small(server, CLIENTS["B"])  # the small run's pipeline, compiled
        t0 = time.monotonic()
        status, body = post_from(server, CLIENTS["A"], shape)
        first = {"status": status, "s": round(time.monotonic() - t0, 2), "detail": json.loads(body).get("detail")}
        while health(server)["compiles"]["running"] or health(server)["compiles"]["queued"]:
            time.sleep(0.5)
        compiled_after = round(time.monotonic() - t0, 1)
        before = health(server)
        t0 = time.monotonic()
        status, _ = post_from(server, CLIENTS["A"], shape)
        again = {"status": status, "ms": round((time.monotonic() - t0) * 1e3, 1)}
        small = round(timed_small(server, CLIENTS["B"]) * 1e3, 1)
        after = health(server)
    return {
        "limit_s": limit,
        "first_request": first,
        "compile_done_after_s": compiled_after,
        "same_shape_again": again,
        "small_run_after_ms": small,
        "cache_misses_added": after["pipelines"]["misses"] - before["pipelines"]["misses"],
        "compiles_added": after["compiles"]["finished"] - before["compiles"]["finished"],
        "timed_out": after["requests"]["timed_out"],
    }


def main(argv: Optional[list] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--inflight", type=int, default=2, help="client A's new-shape requests at once")
    ap.add_argument("--baseline", type=int, default=30, help="unloaded small runs")
    ap.add_argument("--abandon", type=int, default=3, help="new decode shapes abandoned after 0.5 s")
    ap.add_argument("--warmup", action="store_true", help="time the start-up compiles instead")
    ap.add_argument("--timeout", type=float, help="check that a compile past this run timeout is kept instead")
    ap.add_argument("--mesa-cache", type=Path, help="with --warmup: Mesa's shader cache folder (default: a new, empty one)")
    ap.add_argument("--json", type=Path, help="append the summary as one JSON line, with the load averages and the commit")
    server_arguments(ap)
    args = ap.parse_args(argv)
    before = uptime()
    print("before:", before, f"(cpus: {os.cpu_count()})", flush=True)
    with log_folder(args.log_dir) as tmp:
        if args.warmup:
            summary = warmup(args.seconds, tmp, args.root, args.mesa_cache)
        elif args.timeout:
            summary = timeout_keeps(args.timeout, tmp, args.root)
        else:
            summary = measure(args.seconds, args.inflight, args.baseline, args.abandon, tmp, args.root)
    after = uptime()
    print("after:", after)
    print(json.dumps(summary, indent=1))
    if args.json:
        mode = "warmup" if args.warmup else "timeout" if args.timeout else "new_shapes"
        record = {"measurement": mode, "argv": argv if argv is not None else sys.argv[1:], "commit": git_commit()}
        with open(args.json, "a") as f:
            f.write(json.dumps({**record, "uptime_before": before, "uptime_after": after, **summary}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
