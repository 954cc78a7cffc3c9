"""Every applied variant compiled and run once on lavapipe's 8x8x8 cooperative matrices (the smx
test bed, bench/smx_testbed), so that none fails on the GPU for a silly reason: one small case
each, all in one job file, one Node process. Outputs are wrong by design; what must not happen is
an error (a shader that does not compile, a pipeline that fails, a device lost).

    python3 -m lab.fwd_ablation.variants apply
    .venv/bin/python -m lab.ablation.testbed_check --base flash_fwd.smx --case CASE

(for the backward's: --base varlen_bwd.smx --case window-0-0-tl-d64-empty-rows)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench.smx_testbed import jobs
from wgattn import registry

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "bench" / "smx_testbed"


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the registered kernel the variants were made of")
    ap.add_argument("--case", required=True, help="a grid case of the kernel's interface (name prefix)")
    ap.add_argument("--kernels", default="", help="comma-separated ids (default: every applied variant and the base)")
    args = ap.parse_args(argv)
    reg = registry.load()
    ids = [k.strip() for k in args.kernels.split(",") if k.strip()] or [
        k for k in reg.kernels if k == args.base or k.startswith(args.base + "_abl_")
    ]
    out = TESTBED / "out"
    subprocess.run(["bash", str(TESTBED / "testbed.sh"), "target"], check=True)
    target = json.loads((out / "target.json").read_text())
    jobs.QUICK[reg.kernels[args.base].interface] = (args.case,)
    merged = None
    for kid in ids:
        got = jobs.build(target, kid, "quick")
        for j in got["jobs"]:
            j["name"] = f"{kid}:{j['name']}"
        if merged is None:
            merged = got
        else:
            merged["jobs"] += got["jobs"]
    assert merged is not None
    jobs_path, results_path = out / "lab_jobs.json", out / "lab_results.json"
    jobs_path.write_text(json.dumps(merged))
    subprocess.run(["bash", str(TESTBED / "testbed.sh"), "run", str(jobs_path), str(results_path)], check=True)
    res = json.loads(results_path.read_text())
    bad = [f"{name}: {r['error'][:300]}" for name, r in res.get("results", {}).items() if "error" in r]
    bad += [f"{j['name']}: refused ({j['refused']})" for j in merged["jobs"] if "refused" in j]
    ran = sum(1 for r in res.get("results", {}).values() if "error" not in r)
    print(f"testbed_check: {ran} jobs ran, {len(bad)} errors or refusals ({len(ids)} kernels)")
    for b in bad:
        print("  ERROR", b)
    return 1 if bad or ran < len(ids) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
