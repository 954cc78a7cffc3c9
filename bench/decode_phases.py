"""Which phase of a paged_decode kernel holds its time on this GPU: a decode_bandwidth.py case
timed with one phase at a time made trivial in the WGSL (the results are wrong on purpose; only
the times count). Each variant is registered from a copy of shaders/ so that it is compiled
trusted, as the kernel is.

    python3 bench/decode_phases.py [CASE]        (CASE: a name from decode_bandwidth.cases(); default target)

Times are GPU timestamps of single dispatches, each after an upload of the case's cache, so the
GPU idles between them: compare the variants with each other, not with the protocol's figures."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "py"), str(ROOT / "bench")]

import decode_bandwidth as db  # noqa: E402

from wgattn import native, registry  # noqa: E402
from wgattn.interfaces.paged_decode import INTERFACE as decode  # noqa: E402

SHADER = "paged_decode.split.wgsl"
# variant -> (text, replacement) edits of the kernel
VARIANTS = {
    "baseline": [],
    "no exp in the statistics": [
        ("p[r][i] = select(0.0, exp_le0(x - top), x > LOWEST);", "p[r][i] = select(0.0, x - top + 1.0, x > LOWEST);")
    ],
    "no score reduction": [
        (
            "for (var c = 0u; c < DC; c++) {\n        x += part[e * PS + c];",
            "for (var c = 0u; c < 1u; c++) {\n        x += part[e * PS + c];",
        )
    ],
    "no P.V": [("o[r].a += p[r][i] * vv.a;\n        o[r].b += p[r][i] * vv.b;", "o[r].a += p[r][i];")],
    "no score dot products": [
        (
            "part[((z * KPG + i) * RB + r) * PS + lane] = dot(qa, kw[i].a) + dot(qb, kw[i].b);",
            "part[((z * KPG + i) * RB + r) * PS + lane] = kw[i].a.x;",
        )
    ],
    "no next-tile fetch": [
        ("    kn = fetch(false, k_rows, lane);\n", ""),
        ("    vn = fetch(true, k_rows, lane);  // k_rows: the next tile's, looked up for its K\n", ""),
    ],
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("case", nargs="?", default="target", help="a case of decode_bandwidth.cases()")
    ap.add_argument("--seconds", type=float, default=3.0, help="time spent on each variant")
    args = ap.parse_args(argv)
    (case,) = [c for c in db.cases() if c.name == args.case]
    rt = native.NativeRuntime(check_loops=False, trusted=True)
    dcase = db.decode_case(case, db.inputs(case))
    text = (ROOT / "shaders" / SHADER).read_text()
    for name, edits in VARIANTS.items():
        src = text
        for old, new in edits:
            if src.count(old) != 1:
                raise SystemExit(f"{name}: the kernel no longer holds {old!r} once")
            src = src.replace(old, new)
        with tempfile.TemporaryDirectory() as tmp:
            shutil.copytree(ROOT / "shaders", Path(tmp) / "shaders")
            (Path(tmp) / "shaders" / SHADER).write_text(src)
            kernel_id = "paged_decode.split_f16" if case.cache == "f16" else "paged_decode.split"
            kernel = registry.load(Path(tmp) / "shaders" / "manifest.json").kernel(kernel_id)
            plan = decode.plan(kernel, dcase, rt.target)
            for _ in range(5):
                rt.run(plan)
            times = []
            end = time.time() + args.seconds
            while time.time() < end:
                times.append(rt.run(plan).timings["gpu_ms"])
        print(f"{case.name}: {name:26s} median {np.median(times):.3f} ms over {len(times)} dispatches", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
