"""A soak over every kernel the native adapter runs: `uvicorn app:main` (as `make demo` starts
it) answers POST /api/run for each kernel in turn, from a few clients at once, for `--minutes`;
the server's resident memory is sampled every `--every` seconds. A measurement, not a test.

    .venv/bin/python -m lab.server_load.soak --minutes 30 --warmup 3 [--clients 2] [--json soak.json]

Each kernel runs a small seeded configuration of its interface, a new seed per request, at one of
`--shapes` head_dims in turn (kernels specialised per head_dim compile a pipeline for each; all of
them fit the pipeline cache, so after warm-up nothing new is compiled: pipeline_shapes.py
covers more shapes than the cache holds). Prints one line per sample and a summary: RSS after
warm-up, at the end, the difference, the slope after warm-up (least squares, MiB/min), requests
by status, and the server's pipeline cache (GET /api/health).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

from bench.demo import start
from lab.server_load.options import QUIET, log_folder, server_arguments
from tests.real_server import get, post

# A small configuration per interface: every kernel runs in milliseconds on lavapipe.
SMALL = {
    "sdpa_arena": {"batch": 1, "heads": 2, "seq_q": 16, "seq_k": 24, "head_dim": 16, "mask": "causal"},
    "varlen_fwd": {"batch": 2, "heads": 2, "seq_q": 16, "seq_k": 24, "head_dim": 16, "padding": True},
    "flash_fwd": {"batch": 2, "heads": 4, "heads_kv": 2, "seq_q": 16, "seq_k": 24, "head_dim": 16, "padding": True},
    "varlen_bwd": {"batch": 2, "heads": 2, "seq_q": 16, "seq_k": 24, "head_dim": 16, "padding": True},
    "attn_probs": {"heads": 4, "heads_kv": 2, "history": 48, "head_dim": 16},
    "attn_probs_batched": {"heads": 4, "heads_kv": 2, "history": 48, "head_dim": 16, "positions": 8},
    "paged_decode": {"batch": 2, "heads": 4, "heads_kv": 2, "seq_len": 48, "head_dim": 16, "block_size": 16},
}


def runnable(url: str) -> list:
    """(kernel id, interface) of every registered kernel this server's adapter runs."""
    _, body, _ = get(url, "/api/kernels")
    kernels = [(k["id"], k["interface"], k["requires"]) for k in json.loads(body)["kernels"]]
    ok = []
    for kid, interface, requires in kernels:
        status, answer, _ = post(url, {"kernel": kid, "config": SMALL[interface]}, timeout=300)
        if status == 200:
            ok.append((kid, interface))
        elif status == 422 and requires:  # an adapter feature this adapter lacks
            print(f"skipped {kid}: HTTP {status} {str(answer)[:160]}", file=sys.stderr)
        else:  # a configuration of this script's that the server refuses: the soak would not cover it
            raise SystemExit(f"{kid}: HTTP {status} {str(answer)[:300]}")
    return ok


HEAD_DIMS = (16, 24, 32, 8, 40, 48, 56, 64)


def soak(minutes: float, warmup: float, clients: int, every: float, log_dir: Path, root=None, shapes: int = 4) -> dict:
    with start(log_dir, QUIET, name="soak", root=root) as server:
        kernels = runnable(server.url)
        statuses: collections.Counter = collections.Counter()
        stop = threading.Event()
        counter = iter(range(10**12))

        def client():
            while not stop.is_set():
                i = next(counter)
                kid, interface = kernels[i % len(kernels)]
                config = dict(SMALL[interface], seed=i % 100_000, head_dim=HEAD_DIMS[(i // len(kernels)) % shapes])
                try:
                    status, _, _ = post(server.url, {"kernel": kid, "config": config}, timeout=300)
                except OSError as exc:
                    status = type(exc).__name__
                statuses[status] += 1

        threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        samples = []
        while time.monotonic() - t0 < minutes * 60:
            time.sleep(every)
            row = {
                "s": round(time.monotonic() - t0, 1),
                "rss_mib": round(server.rss_mib(), 1),
                "requests": sum(statuses.values()),
            }
            samples.append(row)
            print(json.dumps(row), flush=True)
        stop.set()
        for t in threads:
            t.join(300)
        code, body, _ = get(server.url, "/api/health")
        cache = json.loads(body)["pipelines"] if code == 200 else None
    after = [r for r in samples if r["s"] >= warmup * 60]
    base, end = after[0]["rss_mib"], samples[-1]["rss_mib"]
    slope = float(np.polyfit([r["s"] / 60 for r in after], [r["rss_mib"] for r in after], 1)[0]) if len(after) > 1 else 0.0
    return {
        "kernels": [k for k, _ in kernels],
        "minutes": minutes,
        "warmup_minutes": warmup,
        "clients": clients,
        "rss_after_warmup_mib": base,
        "rss_end_mib": end,
        "growth_after_warmup_mib": round(end - base, 1),
        "max_after_warmup_mib": max(r["rss_mib"] for r in after),
        "slope_mib_per_min": round(slope, 3),
        "statuses": {str(k): v for k, v in statuses.items()},
        "shapes_per_kernel": shapes,
        "pipelines": cache,
        "samples": samples,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=3, help="minutes before the baseline sample")
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--shapes", type=int, default=4, choices=range(1, 9), help="head_dims per kernel")
    ap.add_argument("--every", type=float, default=15, help="seconds between RSS samples")
    ap.add_argument("--json", type=Path, help="write the summary and samples here")
    server_arguments(ap)
    args = ap.parse_args(argv)
    with log_folder(args.log_dir) as tmp:
        summary = soak(args.minutes, args.warmup, args.clients, args.every, tmp, args.root, args.shapes)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
