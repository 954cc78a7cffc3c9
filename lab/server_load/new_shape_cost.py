"""What a shape the server has not seen costs: per kernel the adapter runs, the seconds its page
default configuration's pipelines take to compile on a fresh device (creating them, plus their
first run, less a second run: a driver may compile at either). With Mesa's shader cache empty,
lavapipe compiles for real (a warm cache answers in milliseconds).

    MESA_SHADER_CACHE_DIR=$(mktemp -d) .venv/bin/python -m lab.server_load.new_shape_cost [--json costs.jsonl]
        [--kernels PREFIX,...]
    (on the lent H100: part of lab/decode_block_size/device.sh, NVIDIA's shader disk cache off)

Prints a table and `uptime`'s load averages (a compile's seconds scale with the CPU it gets).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import List, Optional, Sequence

from wgattn import live, native, registry


def compile_seconds(trusted: bool = True, prefixes: Sequence[str] = ("",)) -> List[dict]:
    """Per runnable kernel whose id starts with one of `prefixes`, its page default's compile on a
    fresh device (module docstring)."""
    fresh = native.NativeRuntime(check_loops=False, trusted=trusted)
    rows = []
    for k in registry.load().kernels.values():
        if fresh.target.lacks(k) or not k.id.startswith(tuple(prefixes)):
            continue
        plan = live.build(k.id).plan(fresh.target)
        if plan.unavailable:
            continue
        t0 = time.perf_counter()
        fresh.prepare(plan)
        created = time.perf_counter() - t0
        t0 = time.perf_counter()
        fresh.run(plan)
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        fresh.run(plan)
        second = time.perf_counter() - t0
        compile_s = round(created + first - second, 3)
        rows.append({"kernel": k.id, "pipelines": len(plan.dispatches), "create_s": round(created, 3), "compile_s": compile_s})
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="append one JSON line per kernel")
    ap.add_argument("--kernels", default="", help="only kernels whose id starts with one of these (comma-separated)")
    args = ap.parse_args(argv)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows = compile_seconds(prefixes=args.kernels.split(","))
    adapter = native.NativeRuntime(check_loops=False).name
    if args.json:
        with open(args.json, "a") as f:
            f.writelines(json.dumps(dict(r, adapter=adapter)) + "\n" for r in rows)
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"adapter: {adapter}\nbefore: {load}\nafter:  {after}")
    print("kernel, pipelines, create s, compile s (page default shapes, a fresh device)")
    for r in rows:
        print(f"  {r['kernel']:28s} {r['pipelines']}  {r['create_s']:7.3f}  {r['compile_s']:8.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
