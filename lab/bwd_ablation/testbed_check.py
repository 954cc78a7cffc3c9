"""Every applied variant compiled and run once on lavapipe's 8x8x8 cooperative matrices (the smx
test bed), so that none fails on the GPU for a silly reason: one small case each, all in one job
file, one Node process. Outputs are wrong by design; what must not happen is an error (a shader
that does not compile, a pipeline that fails, a device lost).

    python3 lab/bwd_ablation/variants.py apply
    .venv/bin/python lab/bwd_ablation/testbed_check.py [--case window-0-0-tl-d64-empty-rows]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HARNESS = ROOT / "bench" / "smx_attention"  # the smx test bed (its jobs.py builds plans for any kernel)


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", default="window-0-0-tl-d64-empty-rows", help="a varlen_bwd grid case (name prefix)")
    ap.add_argument("--kernels", default="", help="comma-separated ids (default: every applied variant and the base)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HARNESS))
    import jobs  # the harness's job builder

    from wgattn import registry

    ids = [k.strip() for k in args.kernels.split(",") if k.strip()] or [
        k for k in registry.load().kernels if k == "varlen_bwd.smx" or k.startswith("varlen_bwd.smx_abl_")
    ]
    jobs.QUICK["varlen_bwd"] = (args.case,)
    out = HARNESS / "out"
    out.mkdir(exist_ok=True)
    merged = None
    for kid in ids:
        path = out / f"abl_{kid}.json"
        jobs.main(["build", str(path), "--configs", "8x8x8", "--subgroup", "8", "--storage", "32768", "--cases", "quick", "--kernel", kid])
        got = json.loads(path.read_text())
        path.unlink()
        for c in got["configs"]:
            for j in c["correctness"]:
                j["name"] = f"{kid}:{j['name']}"
        if merged is None:
            merged = got
        else:
            merged["configs"][0]["correctness"] += got["configs"][0]["correctness"]
    assert merged is not None
    jobs_path, results_path = out / "abl_jobs.json", out / "abl_results.json"
    jobs_path.write_text(json.dumps(merged))
    rel = lambda p: str(p.relative_to(HARNESS))  # noqa: E731  (testbed.sh node runs in the harness folder)
    subprocess.run(["bash", str(HARNESS / "testbed.sh"), "node", "testbed.mjs", rel(jobs_path), rel(results_path)], check=True)
    res = json.loads(results_path.read_text())
    bad = list(res.get("errors", []))
    ran = 0
    if res.get("no_smx"):
        bad.append(f"no subgroup matrices: {res['no_smx']}")
    for tag, cfg in res.get("configs", {}).items():
        if "skipped" in cfg:
            bad.append(f"{tag}: {cfg['skipped']}")
        for name, r in cfg.get("correctness", {}).items():
            if r.get("error"):
                bad.append(f"{name}: {r['error'][:300]}")
            else:
                ran += 1
    print(f"testbed_check: {ran} jobs ran, {len(bad)} errors ({len(ids)} kernels)")
    for b in bad:
        print("  ERROR", b)
    return 1 if bad or ran < len(ids) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
