"""Abandoned slow runs against `uvicorn app:main` (as `make demo` starts it): `--runs` clients
each send a slow run (sdpa_arena.seed at 1x16x1024x1024x64 by default) and hang up after
`--after` seconds; then a small valid run is timed against its unloaded time.

    .venv/bin/python -m lab.server_load.abandoned_runs --runs 100 --after 0.05 [--root ../main]

Prints a JSON summary: the small run's unloaded and after-abandonment times, how the server says
the abandoned runs ended (GET /api/health's runs: dropped, stopped, finished) and its 499 lines,
counted by what they say became of the run. A measurement, not a test: tests/test_reliability_server.py checks the same
with a few runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

from bench.demo import start
from lab.server_load.options import QUIET, log_folder, server_arguments
from tests.real_server import SLOW_RUN, abandon, get, timed_small_run

SLOW = {
    "kernel": "sdpa_arena.seed",
    "config": {"batch": 1, "heads": 16, "seq_q": 1024, "seq_k": 1024, "head_dim": 64, "mask": "none"},
}


def health(url: str):
    status, body, _ = get(url, "/api/health")
    return json.loads(body) if status == 200 else None


def measure(runs: int, after: float, log_dir: Path, root=None, settle: float = 0) -> dict:
    with start(log_dir, QUIET, name="abandoned", root=root) as server:
        timed_small_run(server.url)  # the first run creates the runtime
        unloaded = statistics.median(timed_small_run(server.url)[1] for _ in range(7))
        abandon(server, SLOW_RUN, runs, after)
        status, took = timed_small_run(server.url, timeout=600)
        time.sleep(settle)
        stats = health(server.url)
        log = server.log_text()
    return {
        "abandoned": runs,
        "after_s": after,
        "small_run_unloaded_ms": round(unloaded * 1e3, 1),
        "small_run_after_abandonment": {"status": status, "ms": round(took * 1e3, 1)},
        "excess_ms": round((took - unloaded) * 1e3, 1),
        "runs": stats and stats["runs"],
        "lines_499": Counter(line.split("; ", 1)[-1] for line in log.splitlines() if '" 499 ' in line),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--after", type=float, default=0.05, help="seconds before each client hangs up")
    ap.add_argument("--settle", type=float, default=2, help="seconds before reading the server's counters")
    server_arguments(ap)
    args = ap.parse_args(argv)
    with log_folder(args.log_dir) as tmp:
        print(json.dumps(measure(args.runs, args.after, tmp, args.root, args.settle), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
