"""What a pipeline costs to compile on this machine's adapter, against what its run costs: for
KERNEL on the conformance case whose name starts with PREFIX (tile OVERRIDES optional), the CPU
seconds of the first run minus the fastest of three warm ones, and that warm run's time. Run it
with the driver's shader cache off, or the first run is a cache hit:

    export MESA_SHADER_CACHE_DISABLE=true
    .venv/bin/python -m lab.compile_cost.compile_cost flash_fwd.blocked softcap-d64 '{"BR":32,"BC":8,"WG":32}'

On a software adapter (lavapipe) the compile is what a fresh machine waits for: Mesa's shader
cache is empty there (docs/performance.md, "On a software adapter the compile...")."""

from __future__ import annotations

import argparse
import json
import sys
import time

from wgattn import conformance, native, registry
from wgattn.interfaces import of


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", help="a registered kernel id")
    ap.add_argument("case", help="the start of a conformance case's name of its interface")
    ap.add_argument("overrides", nargs="?", default="", help='override constants as JSON: {"BR": 32, ...}')
    args = ap.parse_args(argv)
    kernel_id, prefix = args.kernel, args.case
    overrides = json.loads(args.overrides) if args.overrides else None
    rt = native.NativeRuntime(check_loops=False)
    kernel = registry.load().kernel(kernel_id)
    iface = of(kernel)
    (case,) = [c for c in iface.conformance_cases() if c.name.startswith(prefix)]
    plan = iface.plan(kernel, conformance.judged_case(kernel, case), rt.target, overrides=overrides)
    cpu, wall = [], []
    for _ in range(4):
        c, w = time.process_time(), time.perf_counter()
        rt.run(plan)
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    print(
        json.dumps(
            {
                "kernel": kernel_id,
                "case": case.name,
                "overrides": overrides,
                "compile_cpu_s": round(cpu[0] - min(cpu[1:]), 2),
                "run_ms": round(1000 * min(wall[1:]), 1),
                "constants": plan.dispatches[-1].constants,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
