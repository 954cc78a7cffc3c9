"""Every applied variant compiled and run once on lavapipe's 8x8x8 cooperative matrices (the smx
test bed, bench/smx_testbed), so that none fails on the GPU for a silly reason: one small case
each, all in one job file, one Node process. Outputs are wrong by design; what must not happen is
an error (a shader that does not compile, a pipeline that fails, a device lost).

    python3 -m lab.bwd_ablation.variants apply
    .venv/bin/python -m lab.bwd_ablation.testbed_check [--case window-0-0-tl-d64-empty-rows]
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
    ap.add_argument("--case", default="window-0-0-tl-d64-empty-rows", help="a varlen_bwd grid case (name prefix)")
    ap.add_argument("--kernels", default="", help="comma-separated ids (default: every applied variant and the base)")
    ap.add_argument("--prefix", default="varlen_bwd.smx_abl_", help="the applied variants' id prefix")
    args = ap.parse_args(argv)
    ids = [k.strip() for k in args.kernels.split(",") if k.strip()] or [
        k for k in registry.load().kernels if k == "varlen_bwd.smx" or k.startswith(args.prefix)
    ]
    out = TESTBED / "out"
    subprocess.run(["bash", str(TESTBED / "testbed.sh"), "target"], check=True)
    target = json.loads((out / "target.json").read_text())
    jobs.QUICK["varlen_bwd"] = (args.case,)
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
