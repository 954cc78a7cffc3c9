"""The GEMM on the lavapipe test bed (bench/smx_attention/testbed.sh's Debian trixie root: Mesa
26.1 lavapipe, f16 x f16 -> f32 at 8x8x8, subgroup size 8): plans for that adapter, run by
bed.mjs under dawn.node, judged here by wgattn.gemm.check.

    .venv/bin/python lab/coopmat-ceiling/bed.py check [--shape 128,256,64] [--sgr 2 ...]
    .venv/bin/python lab/coopmat-ceiling/bed.py dump OUTDIR          # SPIR-V Tint emits, per config
"""

from __future__ import annotations

import argparse
import base64
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from wgattn import gemm
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


def bed_configs() -> list:
    """The H100 sweep's configurations at 8x8x8 (the bed's only shape): same code paths."""
    return gemm.sweep([(8, 8, 8)])


def jobs(case: gemm.Case, configs) -> list:
    out = []
    for cfg in configs:
        p = gemm.plan(case, cfg, BED)
        bytes_ = {b.name: base64.b64encode(b.data).decode() for b in p.buffers if b.data is not None}
        fills = [f.to_js() for f in gemm.fill_plans(p)] if not p.unavailable else []
        out.append({"tag": cfg.tag(), "plan": p.to_js(), "bytes": bytes_, "fills": fills})
    return out


def run_bed(job_file: Path, results: Path, toggles: str, stdout=None) -> None:
    rel = lambda p: str(p.relative_to(HERE))  # noqa: E731
    cmd = ["bash", str(HERE / "inroot.sh"), "node", "--no-warnings", "bed.mjs", rel(job_file), rel(results), "--toggles", toggles]
    subprocess.run(cmd, cwd=HERE, check=True, stdout=stdout)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["check", "dump"])
    ap.add_argument("outdir", nargs="?", default=str(OUT))
    ap.add_argument("--shape", default="128,256,96", help="rows,cols,depth (every sweep block must divide it)")
    ap.add_argument("--only", default="", help="substring of the configurations' tags")
    ap.add_argument("--unchecked", action="store_true", help="with disable_robustness (Dawn's bounds checks off)")
    args = ap.parse_args()
    out = Path(args.outdir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    case = gemm.Case(*(int(x) for x in args.shape.split(",")))
    configs = [c for c in bed_configs() if args.only in c.tag()]
    job_file, results = out / "bed_jobs.json", out / "bed_results.json"
    job_file.write_text(json.dumps(jobs(case, configs)))
    toggles = "allow_unsafe_apis" + (",disable_robustness" if args.unchecked else "")
    if args.what == "dump":
        with open(out / "dump.txt", "w") as f:
            run_bed(job_file, results, toggles + ",dump_shaders", stdout=f)
        split_dump(out / "dump.txt", out)
    else:
        run_bed(job_file, results, toggles)
    bad = 0
    for cfg, res in zip(configs, json.loads(results.read_text())):
        if "error" in res:
            print(f"{cfg.tag():60s} ERROR {res['error'][:300]}")
            bad += 1
            continue
        c = np.frombuffer(base64.b64decode(res["c"]), dtype=np.float32)
        v = gemm.check(case, c, bt=cfg.bt)
        bad += not v["pass"]
        print(f"{cfg.tag():60s} {'pass' if v['pass'] else 'FAIL'} max err {v['max_abs_err']:.3g} (allowed {v['allowed']:.3g})")
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
