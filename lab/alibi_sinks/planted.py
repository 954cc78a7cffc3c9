"""Bugs planted in the ALiBi and sink paths of flash_fwd.smx and varlen_bwd.smx, each run on
lavapipe's 8x8x8 cooperative matrices (the smx test bed) on a grid case with ALiBi or sinks
(py/wgattn/interfaces/_varlen.py, ALIBI_SINK_ROWS) and judged by the kernel's own rule: each must
fail, by a wide margin. One job file, one Node process for every bug.

    .venv/bin/python -m lab.alibi_sinks.planted [--only NAME,NAME] [--judge-only]

Each bug is one edit of the registered WGSL (`old` must occur exactly once, or the script stops:
the edits follow the kernel's text) written to bench/smx_testbed/out/planted_<name>.wgsl and
planned through the test bed's `--template` path. Prints, per bug, the worst |error| / allowance
over its case's outputs and whether the case failed; exit status 1 if any bug passes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

from bench.smx_testbed import jobs

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "bench" / "smx_testbed"
GQA = "alibi-sinks-causal-br-d64-gqa3-empty-rows"  # GQA 6:2, causal, ALiBi and sinks, rows with no key
DENSE = "alibi-dense-tl-d59-unequal"  # no mask: whole tiles inside the band, ALiBi only
SINKS = "sinks-window-softcap-tl-d111-gqa2"  # sinks under a window and softcap
BIAS = "bias = -slope * vec4<f32>(abs(j - (i + vec4<i32>(offset))));  // i32 difference first\n        }\n"

# name -> (kernel, what is wrong, (old, new), case name prefix)
BUGS: Dict[str, Tuple[str, str, Tuple[str, str], str]] = {
    "fwd_slope_sign": (
        "flash_fwd.smx",
        "the ALiBi bias added, not subtracted",
        ("s -= slope * vec4<f32>(abs(j - pos));", "s += slope * vec4<f32>(abs(j - pos));"),
        DENSE,
    ),
    "fwd_sink_left_out": (
        "flash_fwd.smx",
        "the sink left out of the denominator (kept in the lse's max)",
        ("    z += exp2((sink - top) * LOG2E);\n", ""),
        SINKS,
    ),
    "bwd_dkdv_group_slope": (
        "varlen_bwd.smx",
        "bwd_dkdv takes the first query head's slope for every head of the GQA group",
        ("alibi_slope(g * grp + it / ntile)", "alibi_slope(g * grp)"),
        GQA,
    ),
    "bwd_dkdv_full_tiles": (
        "varlen_bwd.smx",
        "bwd_dkdv adds the bias only on tiles the mask cuts (as if it were a mask)",
        ("if (alibi) {\n          " + BIAS + "        let at =", "if (alibi && !full) {\n          " + BIAS + "        let at ="),
        DENSE,
    ),
    "bwd_dq_origin": (
        "varlen_bwd.smx",
        "bwd_dq's bias measured from one query row off the diagonal",
        (
            BIAS + "        let gr = grads4(rs[ii / S]",
            BIAS.replace("(offset)", "(offset + 1)") + "        let gr = grads4(rs[ii / S]",
        ),
        DENSE,
    ),
}


def planted(text: str, kernel: str, old: str, new: str) -> str:
    n = text.count(old)
    if n != 1:
        raise SystemExit(f"planted: {old[:60]!r} occurs {n} times in {kernel}.wgsl, not once")
    return text.replace(old, new)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated bug names (default: every bug)")
    ap.add_argument("--judge-only", action="store_true", help="judge the last run's results again (no run)")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(BUGS)
    out = TESTBED / "out"
    out.mkdir(exist_ok=True)
    if not args.judge_only:
        subprocess.run(["bash", str(TESTBED / "testbed.sh"), "target"], check=True)
    target = json.loads((out / "target.json").read_text())
    built: Dict[str, dict] = {}
    merged: List[dict] = []
    for name in names:
        kernel, _, (old, new), case = BUGS[name]
        path = out / f"planted_{name}.wgsl"
        path.write_text(planted((ROOT / "shaders" / f"{kernel}.wgsl").read_text(), kernel, old, new))
        b = jobs.build(target, kernel, case, str(path))
        built[name] = b
        merged += [dict(j, name=f"{name}:{j['name']}") for j in b["jobs"]]
    jobs_path, results_path = out / "planted_jobs.json", out / "planted_results.json"
    if not args.judge_only:
        jobs_path.write_text(json.dumps(dict(next(iter(built.values())), jobs=merged)))
        subprocess.run(["bash", str(TESTBED / "testbed.sh"), "run", str(jobs_path), str(results_path)], check=True)
    results = json.loads(results_path.read_text()).get("results", {})
    caught = True
    for name, b in built.items():
        mine = {k.split(":", 1)[1]: r for k, r in results.items() if k.startswith(name + ":")}
        rows = jobs.judge_results(b, {"results": mine})
        ratios = [r["max_abs_err"] / r["allowance"] for r in rows if "pass" in r and r["allowance"]]
        errors = [r for r in rows if "error" in r]
        failed = {r["case"] for r in rows if r.get("pass") is False or "error" in r}
        all_fail = bool(rows) and failed == {r["case"] for r in rows}
        caught &= all_fail
        print(
            f"{name:22} {'caught' if all_fail else 'MISSED'}: worst |err| / allowance {max(ratios, default=float('nan')):.3g}"
            f" over {len(rows)} outputs{f', {len(errors)} errors' if errors else ''} ({BUGS[name][0]}: {BUGS[name][1]})"
        )
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
