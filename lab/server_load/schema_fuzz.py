"""Schemathesis against `uvicorn app:main` (as `make demo` starts it), every operation, positive
and negative cases: the counts by status, 5xx and hangs, and the share answered 200.

    .venv/bin/python -m lab.server_load.schema_fuzz --examples 2500 [--root ../main]

`--examples` is per operation and mode: POST /api/run takes nearly all of the cases (the GET
operations have no parameters, so each is one case per mode). Prints a JSON summary. A
measurement; tests/test_schema_fuzz.py runs fewer cases in the slow tier and asserts on them.
"""

from __future__ import annotations

import argparse
import json
import time

from bench.demo import start
from lab.server_load.options import QUIET, log_folder, server_arguments
from tests.real_server import timed_small_run
from tests.schema_fuzz import fuzz


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=2500, help="cases per operation and mode")
    ap.add_argument("--seed", type=int, default=0, help="0: derandomized (the same cases every run)")
    server_arguments(ap)
    args = ap.parse_args()
    with log_folder(args.log_dir) as logs, start(logs, QUIET, name="schema-fuzz", root=args.root) as server:
        t0 = time.time()
        summary = fuzz(server.url, args.examples, seed=args.seed)
        summary["seconds"] = round(time.time() - t0, 1)
        status, seconds = timed_small_run(server.url)
        summary["small_run_after"] = {"status": status, "seconds": round(seconds, 3)}
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
