"""Distinct shapes against `uvicorn app:main` (as `make demo` starts it): `--shapes` requests to
POST /api/run, each a shape not seen before (kernels in turn; head_dim, seq_q and seq_k varied),
so that kernels specialised per shape compile pipelines the cache has not seen.

    .venv/bin/python -m lab.server_load.pipeline_shapes --shapes 1000 [--every 100] [--root ../main]
    .venv/bin/python -m lab.server_load.pipeline_shapes --shapes 1000 --kernels flash_fwd.tiled --cache 4

The second keeps fewer pipelines than the shapes need, so that most requests evict one and
compile another: the server's memory must level off all the same.

Prints one line per `--every` requests (the server's RSS and GET /api/health's pipeline cache:
entries, bound, hits, misses, evictions) and a JSON summary. A measurement, not a test:
tests/test_native_runtime_bounds.py checks the bound with a small cache.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

from bench.demo import start
from lab.server_load.options import QUIET, log_folder, server_arguments
from lab.server_load.soak import SMALL
from tests.real_server import get, post


def shape(i: int, kernels: list) -> dict:
    """Request i: kernel i mod K with a (head_dim, seq_q, seq_k) no earlier request of it had
    (for i < 11 * 377: 377 is the least common multiple of 13 and 29)."""
    kid, interface = kernels[i % len(kernels)]
    j = i // len(kernels)
    config = dict(SMALL[interface], head_dim=8 + j % 25, seed=i)  # head_dims 8..32: compiles take seconds
    if "seq_q" in config:
        config.update(seq_q=4 + j % 13, seq_k=4 + j % 29)
    else:  # attn_probs: the history is the key length
        config.update(history=32 + j % 29)
    return {"kernel": kid, "config": config}


def measure(shapes: int, every: int, log_dir: Path, root=None, only=None, cache=None) -> dict:
    env = dict(QUIET, **({"WGATTN_PIPELINE_CACHE": str(cache)} if cache else {}))
    with start(log_dir, env, name="shapes", root=root) as server:
        kernels = [(k["id"], k["interface"]) for k in json.loads(get(server.url, "/api/kernels")[1])["kernels"]]
        kernels = [k for k in kernels if not only or k[0] in only]
        statuses: Counter = Counter()
        rows = []
        t0 = time.monotonic()
        for i in range(shapes):
            status, _, _ = post(server.url, shape(i, kernels), timeout=600)
            statuses[status] += 1
            if (i + 1) % every == 0 or i + 1 == shapes:
                code, body, _ = get(server.url, "/api/health")
                cache = json.loads(body)["pipelines"] if code == 200 else None
                row = {
                    "requests": i + 1,
                    "s": round(time.monotonic() - t0, 1),
                    "rss_mib": round(server.rss_mib(), 1),
                    "pipelines": cache,
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    return {
        "shapes": shapes,
        "statuses": {str(k): v for k, v in statuses.items()},
        "rss_first_mib": rows[0]["rss_mib"],
        "rss_max_mib": max(r["rss_mib"] for r in rows),
        "rss_end_mib": rows[-1]["rss_mib"],
        "pipelines_end": rows[-1]["pipelines"],
        "max_entries_seen": max((r["pipelines"] or {}).get("entries", 0) for r in rows),
        "rows": rows,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", type=int, default=1000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--kernels", help="comma-separated kernel ids (default: every registered kernel)")
    ap.add_argument("--cache", type=int, help="the server's WGATTN_PIPELINE_CACHE (default: its own, 128)")
    ap.add_argument("--json", type=Path, help="write the summary here")
    server_arguments(ap)
    args = ap.parse_args(argv)
    with log_folder(args.log_dir) as tmp:
        only = args.kernels.split(",") if args.kernels else None
        summary = measure(args.shapes, args.every, tmp, args.root, only, args.cache)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
