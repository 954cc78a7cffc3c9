"""Bugs planted in the rebuilt varlen_bwd.smx's new paths, each run on lavapipe's 8x8x8 cooperative
matrices (the smx test bed) on the cases that reach it and judged by the kernel's own rule: each
must fail, by a wide margin. One job file, one Node process for every bug.

    .venv/bin/python -m lab.bwd_rebuild.planted [--only NAME,NAME]

Each bug is an edit of the registered WGSL (`old` must occur exactly once, or the script stops:
the edits follow the kernel's text) written to bench/smx_testbed/out/planted_<name>.wgsl and planned
through the test bed's `--template` path. Prints, per bug, the worst |error| / allowance over
its cases' outputs and whether every case failed somewhere; exit status 1 if any bug passes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import numpy as np

from bench.smx_testbed import jobs
from wgattn import interfaces
from wgattn.interfaces import Case

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "bench" / "smx_testbed"
KERNEL = "varlen_bwd.smx"
D64 = "causal-br-d64-mqa-empty-seqs"  # causal, ragged lengths, empty sequences, MQA
GQA = "softcap-d64-gqa3"
WINDOW = "window-both-causal-br-d130"
# A case of its own: a causal diagonal 6 keys right of the top-left corner, so that on lavapipe
# (64-row blocks, 8-key tiles) a key tile's last key sits one past the diagonal of a block's
# first row (tiles start at multiples of 8; the key pass's tiles start on the diagonal itself and
# never meet that edge one key off).
EDGE = "planted-causal-br-offset6"

# name -> (what is wrong, [(old, new) edits], case name prefixes)
BUGS: Dict[str, Tuple[str, List[Tuple[str, str]], Tuple[str, ...]]] = {
    "delta_missing": (
        "dS = P dP: delta = rowsum(dout * out) left out",
        [
            (
                "return array<vec4<f32>, 2>(p, p * (dp - delta) * (slope * scale));",
                "return array<vec4<f32>, 2>(p, p * dp * (slope * scale));",
            )
        ],
        (D64,),
    ),
    "gqa_head_skipped": (
        "bwd_dkdv walks one query head of each GQA group too few",
        [("let tiles = grp * ntile;", "let tiles = max(1u, grp - 1u) * ntile;")],
        (GQA,),
    ),
    "window_edge": (
        "the left window edge off by one (j > i + offset - window_left)",
        [("let lo = (i + vec4<i32>(offset - wl)) <= j;", "let lo = (i + vec4<i32>(offset - wl)) < j;")],
        (WINDOW,),
    ),
    "full_tile_edge": (
        "a tile one key past the causal diagonal taken as unmasked",
        [("(wr < 0 || j1 <= i0 + offset + wr);", "(wr < 0 || j1 <= i0 + offset + wr + 1);")],
        (EDGE,),
    ),
    "dq_half_dropped": (
        "the second subgroup's half of dQ (its head-dim chunks) never stored",
        [
            (
                "if ((part * DCS + {cl}u) / NT == ch) {",
                "if ((part * DCS + {cl}u) / NT == ch && part == 0u) {",
            )
        ],
        (D64,),
    ),
    "stale_buffer": (
        "bwd_dkdv's score products read tile buffer 0 whatever the tile (two buffers)",
        [
            (
                "keys x query rows.\n    if (mx) {\n#for r NR\n#for n NT\n      {\n        var s = AF();\n#for c MAX_DC\n"
                "        s = subgroupMatrixMultiplyAccumulate(x{r}_{c}, subgroupMatrixLoad<RF, col_major>(&tt[buf * 2u",
                "keys x query rows.\n    if (mx) {\n#for r NR\n#for n NT\n      {\n        var s = AF();\n#for c MAX_DC\n"
                "        s = subgroupMatrixMultiplyAccumulate(x{r}_{c}, subgroupMatrixLoad<RF, col_major>(&tt[0u * 2u",
            )
        ],
        (D64,),
    ),
    "prefetch_rows": (
        "the prefetched query tile's valid rows counted from this tile, not the next",
        [
            (
                "let v1 = select(0u, u32(max(0, min(i32(BT), len_q - t1))), n1 < tiles);",
                "let v1 = select(0u, u32(max(0, min(i32(BT), len_q - t0))), n1 < tiles);",
            )
        ],
        (D64,),
    ),
    "roles_swapped": (
        "bwd_dkdv's dK takes Pᵀ and dV takes dSᵀ",
        [
            (
                "pp[jj / S][tr / S][a16] = vec4<f16>(gr[1]);\n        pp[RB + jj / S][tr / S][a16] = vec4<f16>(gr[0]);",
                "pp[jj / S][tr / S][a16] = vec4<f16>(gr[0]);\n        pp[RB + jj / S][tr / S][a16] = vec4<f16>(gr[1]);",
            )
        ],
        (D64,),
    ),
    "chunk_fixed": (
        "bwd_dkdv's written-out dK and dV products read the tile's head-dim chunk 0 for every chunk",
        [("[{kk}u * MAX_DC + {c}u], 0u, P4), y{r}_{c});", "[{kk}u * MAX_DC + 0u], 0u, P4), y{r}_{c});")],
        (D64,),
    ),
}


def edge_case() -> Case:
    bwd = interfaces.get("varlen_bwd")
    return bwd.grid_case(np.random.RandomState(7), EDGE, [(128, 134)], 2, 1, 64, {"causal": True}, 1.0)


def planted(text: str, edits: List[Tuple[str, str]]) -> str:
    for old, new in edits:
        n = text.count(old)
        if n != 1:
            raise SystemExit(f"planted: {old[:60]!r} occurs {n} times in {KERNEL}.wgsl, not once")
        text = text.replace(old, new)
    return text


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated bug names (default: every bug)")
    ap.add_argument("--judge-only", action="store_true", help="judge the last run's results again (no run)")
    args = ap.parse_args(argv)
    extra = jobs.EXTRA["varlen_bwd"]
    jobs.EXTRA["varlen_bwd"] = lambda: extra() + [edge_case()]  # before the test bed's case list is first built
    names = [n for n in args.only.split(",") if n] or list(BUGS)
    out = TESTBED / "out"
    out.mkdir(exist_ok=True)
    if not args.judge_only:
        subprocess.run(["bash", str(TESTBED / "testbed.sh"), "target"], check=True)
    target = json.loads((out / "target.json").read_text())
    source = (ROOT / "shaders" / f"{KERNEL}.wgsl").read_text()
    built: Dict[str, dict] = {}
    merged: List[dict] = []
    for name in names:
        what, edits, cases = BUGS[name]
        path = out / f"planted_{name}.wgsl"
        path.write_text(planted(source, edits))
        jobs.QUICK["varlen_bwd"] = cases
        b = jobs.build(target, KERNEL, "quick", str(path))
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
        jobs.QUICK["varlen_bwd"] = BUGS[name][2]  # the cases judge_results plans again
        rows = jobs.judge_results(b, {"results": mine})
        ratios = [r["max_abs_err"] / r["allowance"] for r in rows if "pass" in r and r["allowance"]]
        errors = [r for r in rows if "error" in r]
        failed_cases = {r["case"] for r in rows if r.get("pass") is False or "error" in r}
        all_fail = failed_cases == {r["case"] for r in rows}
        worst = max(ratios, default=float("nan"))
        caught &= all_fail
        print(
            f"{name:18} {'caught' if all_fail else 'MISSED'}: worst |err| / allowance {worst:.3g} over {len(rows)} outputs"
            f"{f', {len(errors)} errors' if errors else ''} ({BUGS[name][0]})"
        )
    return 0 if caught else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
