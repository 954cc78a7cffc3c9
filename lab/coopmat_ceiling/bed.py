"""The GEMM on the lavapipe test bed (bench/smx_testbed/testbed.sh's Debian trixie root: Mesa
26.1 lavapipe, f16 x f16 -> f32 at 8x8x8, subgroup size 8): every tile of the sweep planned for
that adapter, its A and B filled on the GPU as the page fills them, run by bed.mjs under
dawn.node (the page's executor), C judged here as the page judges it (wgattn.gemm.check_filled).

    .venv/bin/python -m lab.coopmat_ceiling.bed check [--shape 96,192,96] [--only TEXT] [--unchecked]
    .venv/bin/python -m lab.coopmat_ceiling.bed dump OUTDIR [--unchecked]   # the SPIR-V Tint emits, per tile
(OUTDIR inside this folder: the bed's root sees the checkout only.)
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from wgattn import bandwidth, gemm
from wgattn.target import MATRIX_FEATURE, MatrixConfig, Target

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
BED = Target(
    features=frozenset(gemm.NEEDS),
    limits={
        "max-compute-workgroup-storage-size": 32768,
        "max-compute-invocations-per-workgroup": 1024,
        "max-compute-workgroup-size-x": 1024,
        "max-storage-buffer-binding-size": 1 << 27,
        "max-buffer-size": 1 << 28,
    },
    software=True,
    matrix_configs=(MatrixConfig("f16", "f32", 8, 8, 8),),
    name="lavapipe (Mesa 26.1, dawn.node)",
    subgroup_sizes=(8, 8),
)
assert MATRIX_FEATURE in BED.features


def bed_tiles() -> list:
    """Every code path of the H100 sweep at 8x8x8 (the bed's only shape), in blocks small enough
    for lavapipe to compile in seconds (the sweep's own 128 x 128 blocks written out take it
    minutes each): products written out or looped, staging split or flat, one or two stages, a
    block of more rows than columns and one of more columns."""
    small = gemm.Tile(m=8, n=8, k=8, sgr=2, sgc=2, tm=2, tn=1, kt=16)
    return [replace(small, unroll=u, split=s, stages=st) for u in (True, False) for s in (True, False) for st in (1, 2)] + [
        replace(small, tm=1, tn=4, kt=32),
        replace(small, sgr=1, sgc=4, tm=4, tn=1),
    ]


def jobs(case, tiles) -> list:
    out = []
    for tile in tiles:
        p = gemm.plan(case, tile, BED)
        fills = [f.to_js() for f in bandwidth.fill_plans(p, case.inputs)] if not p.unavailable else []
        out.append({"tag": tile.tag(), "plan": p.to_js(), "bytes": {}, "fills": fills})
    return out


def run_bed(job_file: Path, results: Path, toggles: str, stdout=None) -> None:
    rel = lambda p: str(p.relative_to(HERE))  # noqa: E731
    cmd = ["bash", str(HERE / "inroot.sh"), "node", "--no-warnings", "bed.mjs", rel(job_file), rel(results), "--toggles", toggles]
    subprocess.run(cmd, cwd=HERE, check=True, stdout=stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check", "dump"])
    ap.add_argument("outdir", nargs="?", default=str(OUT))
    ap.add_argument("--shape", default="96,192,96", help="rows,cols,depth (every tile's block must divide it)")
    ap.add_argument("--only", default="", help="substring of the configurations' tags")
    ap.add_argument("--unchecked", action="store_true", help="with disable_robustness (Dawn's bounds checks off)")
    args = ap.parse_args()
    out = Path(args.outdir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows, cols, depth = (int(x) for x in args.shape.split(","))
    case = gemm.case(gemm.GemmConfig(rows=rows, cols=cols, depth=depth))
    tiles = [t for t in bed_tiles() if args.only in t.tag()]
    job_file, results = out / "bed_jobs.json", out / "bed_results.json"
    job_file.write_text(json.dumps(jobs(case, tiles)))
    toggles = "allow_unsafe_apis" + (",disable_robustness" if args.unchecked else "")
    if args.what == "dump":
        with open(out / "dump.txt", "w") as f:
            run_bed(job_file, results, toggles + ",dump_shaders", stdout=f)
        split_dump(out / "dump.txt", out)
    else:
        run_bed(job_file, results, toggles)
    bad = 0
    for tile, res in zip(tiles, json.loads(results.read_text())):
        if "error" in res:
            print(f"{tile.tag():50s} ERROR {res['error'][:300]}")
            bad += 1
            continue
        c = np.frombuffer(base64.b64decode(res["c"]), dtype=np.float32).reshape(rows, cols)
        v = gemm.check_filled(case, {"c": c})
        bad += not v["ok"]
        print(f"{tile.tag():50s} {'pass' if v['ok'] else 'FAIL'} max err {v['max_abs_err']:.3g} (allowed {v['allowed']:.3g})")
    return 1 if bad else 0


def split_dump(dump: Path, out: Path) -> None:
    """dump.txt cut into one SPIR-V file per job (the gemm shader's; fills left out)."""
    job, buf, spirv = None, [], {}
    for line in dump.read_text().splitlines():
        if line.startswith("@@ job "):
            job = line[7:]
            continue
        if line.startswith("/* Dumped SPIRV disassembly */"):
            buf = []
            continue
        if buf is not None:
            buf.append(line)
        if line.strip() == "OpFunctionEnd" and job:
            text = "\n".join(buf)
            if "OpCooperativeMatrix" in text:
                spirv[job] = text
    for tag, text in spirv.items():
        (out / ("spirv_" + tag.replace(" ", "_").replace("/", "-") + ".spvasm")).write_text(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
