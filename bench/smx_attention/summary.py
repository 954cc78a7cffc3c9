"""After the browser runs: judge each run's correctness outputs (jobs.judge_results), time PyTorch's
f16 SDPA and GEMM on the same shapes (when torch with CUDA is there), write everything under OUT
and print a short table last.

    python3 summary.py JOBS.json OUT_DIR MODE=RESULTS.json [MODE=RESULTS.json ...]
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import jobs as jobs_mod


def torch_rows(shapes: List[List[int]], gemm: int, sdpa: bool = True) -> Dict[str, Dict[str, float]]:
    """PyTorch f16 SDPA (causal; the forward, so only with `sdpa`) and f16 GEMM: warm-up by time,
    5 rounds, median and spread."""
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        return {"error": {"why": f"torch unavailable: {e}"}}  # type: ignore[dict-item]
    if not torch.cuda.is_available():
        return {"error": {"why": "torch has no CUDA device"}}  # type: ignore[dict-item]

    def rounds(fn, flops: float) -> Dict[str, float]:
        t0 = time.time()
        while time.time() - t0 < 1.5:
            fn()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        n, ms = 20, []
        for _ in range(5):
            s.record()
            for _ in range(n):
                fn()
            e.record()
            torch.cuda.synchronize()
            ms.append(s.elapsed_time(e) / n)
        med = statistics.median(ms)
        return {"median_ms": med, "min_ms": min(ms), "max_ms": max(ms), "tflops": flops / (med * 1e-3) / 1e12}

    out = {}
    for b, h, s_, d in shapes if sdpa else []:
        q, k, v = (torch.randn(b, h, s_, d, device="cuda", dtype=torch.half) for _ in range(3))
        out[f"sdpa_f16:{b}x{h}x{s_}x{d}"] = rounds(
            lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), 4 * b * h * s_ * s_ * d / 2
        )
    a = torch.randn(gemm, gemm, device="cuda", dtype=torch.half)
    bt = torch.randn(gemm, gemm, device="cuda", dtype=torch.half)
    out[f"gemm_f16:{gemm}"] = rounds(lambda: a @ bt.T, 2 * gemm**3)
    out["device"] = {"name": torch.cuda.get_device_name(0)}  # type: ignore[dict-item]
    return out


def _fmt(r: Optional[Dict[str, Any]]) -> str:
    if not r:
        return "-"
    if "tflops" not in r:
        return "err"
    spread = f"{r['tflops'] * r['median_ms'] / r['max_ms']:.1f}-{r['tflops'] * r['median_ms'] / r['min_ms']:.1f}"
    return f"{r['tflops']:.1f} [{spread}]"


def main() -> int:
    jobs_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    runs = dict(a.split("=", 1) for a in sys.argv[3:])
    jobs = json.loads(jobs_path.read_text())
    summary: Dict[str, Any] = {"modes": {}}
    lines: List[str] = []
    for mode, path in runs.items():
        p = Path(path)
        if not p.exists():
            summary["modes"][mode] = {"missing": str(p)}
            lines.append(f"{mode}: no results ({p})")
            continue
        res = json.loads(p.read_text())
        info: Dict[str, Any] = {"errors": res.get("errors", []), "no_smx": res.get("no_smx"), "wall_s": res.get("wall_s")}
        if res.get("configs"):
            rows = jobs_mod.judge_results(jobs_path, p)
            (out / f"judge_{mode}.json").write_text(json.dumps(rows, indent=1))
            judged = [r for r in rows if "pass" in r]
            failed = [r for r in rows if "pass" in r and not r["pass"]] + [r for r in rows if "error" in r]
            info["passed"], info["judged"] = sum(r["pass"] for r in judged), len(judged)
            info["failed"] = [
                f"{r['config']} {r['case']} {r.get('output', '')}: {r.get('error') or r['max_abs_err']}" for r in failed
            ]
            worst = max(judged, key=lambda r: r["max_abs_err"] / r["allowance"], default=None)
            if worst:
                info["worst_ratio"] = (
                    f"{worst['max_abs_err'] / worst['allowance']:.2f} ({worst['config']} {worst['case']} {worst['output']})"
                )
        for cfg in res.get("configs", {}):  # strip the output bytes before keeping the run
            for r in res["configs"][cfg].get("correctness", {}).values():
                r.pop("raw", None)
        (out / f"results_{mode}.json").write_text(json.dumps(res, indent=1))
        info["timing"] = {
            k: {n: {x: r[x] for x in ("median_ms", "min_ms", "max_ms", "tflops", "timer", "reps")} for n, r in v["rows"].items()}
            for k, v in res.get("timing", {}).items()
        }
        info["timing_errors"] = {k: v["errors"] for k, v in res.get("timing", {}).items() if v.get("errors")}
        info["gemm"] = {
            k: {x: v.get(x) for x in ("median_ms", "tflops", "max_abs_err", "error")} for k, v in res.get("gemm", {}).items()
        }
        summary["modes"][mode] = info
    gemm = next((e["gemm"][0]["dims"][0] for e in jobs["configs"] if e.get("gemm")), 8192)
    kernel = jobs.get("kernel", "flash_fwd.smx")
    # PyTorch's backward is timed by bench/suite.py (the protocol); here only its forward is.
    summary["torch"] = torch_rows(jobs["timed"], gemm, sdpa=jobs.get("interface", "flash_fwd") == "flash_fwd")
    (out / "summary.json").write_text(json.dumps(summary, indent=1))

    # The table: TFLOP/s median [spread over rounds], one column per browser run.
    modes = [m for m in runs if "timing" in summary["modes"].get(m, {})]
    print(f"\n==== {kernel} on this GPU (TFLOP/s, median [min-max of rounds]) ====")
    for mode in runs:
        i = summary["modes"][mode]
        if "missing" in i or i.get("no_smx"):
            print(f"{mode}: {i.get('missing') or i.get('no_smx')}")
            continue
        print(
            f"{mode}: correctness {i.get('passed', 0)}/{i.get('judged', 0)} outputs pass; "
            f"worst err/allowance {i.get('worst_ratio')}; {len(i.get('failed', []))} failed; "
            f"page {i.get('wall_s')} s; errors {i.get('errors')[:2]}"
        )
        for f in i.get("failed", [])[:8]:
            print(f"   FAIL {f}")
    keys = sorted({(k, n) for m in modes for k, v in summary["modes"][m]["timing"].items() for n in v})
    print(f"{'config:shape':<24} {'variant':<10} " + " ".join(f"{m:>18}" for m in modes))
    for k, n in keys:
        print(
            f"{k:<24} {n.split(':')[0]:<10} "
            + " ".join(f"{_fmt(summary['modes'][m]['timing'].get(k, {}).get(n)):>18}" for m in modes)
        )
    for m in modes:
        for cfg, g in summary["modes"][m]["gemm"].items():
            t = f"{g['tflops']:.1f}" if g.get("tflops") else g.get("error")
            print(f"{cfg} ({m}): {t} TFLOP/s, max err {g.get('max_abs_err')}")
    for name, r in summary["torch"].items():
        print(f"torch {name}: {_fmt(r) if 'tflops' in r else r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
