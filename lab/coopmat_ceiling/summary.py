"""The table of one device.sh run: NVIDIA's sample per variant (TFLOP/s at 4096^3 per fragment
shape and B layout, its correctness check) beside gemm.smx's sweep in Chromium (robustness on
and off). Writes OUT/summary.json and prints the table.

    python3 lab/coopmat_ceiling/summary.py OUT
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Dict, List


def sample_runs(text: str) -> List[Dict[str, object]]:
    """One entry per runner call of sample.txt: its variant, whether it checked, and per case
    ("16x16x16 B" / "16x16x16 Bt") its TFLOP/s or its check."""
    runs: List[Dict[str, object]] = []
    shape = ""
    for line in text.splitlines():
        m = re.match(r"=== variant (\S+)( --correctness)?", line)
        if m:
            runs.append({"variant": m.group(1), "correctness": bool(m.group(2)), "cases": {}})
            continue
        m = re.match(r"cooperativeMatrixProps = (\d+x\d+x\d+)", line)
        if m:
            shape = m.group(1)
            continue
        m = re.match(r"TILE_M=(\d+) TILE_N=(\d+), TILE_K=\d+ BColMajor=(\d) workgroupSize=\d+\s*(.*)", line)
        if m and runs:
            key = f"{shape} {'Bt' if m.group(3) == '1' else 'B'} {m.group(1)}x{m.group(2)}"
            rest = m.group(4)
            tf = re.search(r"([\d.]+) TFlops", rest)
            runs[-1]["cases"][key] = float(tf.group(1)) if tf else rest.strip()  # type: ignore[index]
        elif runs and ("CHECK_RESULT" in line or "error" in line.lower()):
            runs[-1].setdefault("errors", []).append(line.strip())  # type: ignore[union-attr]
    return runs


def main() -> int:
    out = Path(sys.argv[1])
    summary: Dict[str, object] = {}
    lines: List[str] = []
    sample = out / "sample.txt"
    if sample.exists():
        runs = sample_runs(sample.read_text())
        summary["sample"] = runs
        checks = {r["variant"]: r["cases"] for r in runs if r["correctness"]}
        timed = [r for r in runs if not r["correctness"]]
        keys = sorted({k for r in timed for k in r["cases"]})  # type: ignore[attr-defined]
        lines.append("NVIDIA's sample at 4096^3, TFLOP/s (100 products a figure); check at 256^3")
        lines.append(f"{'variant':14s} " + " ".join(f"{k[: k.rfind(' ')]:>13s}" for k in keys) + "  check")
        for r in timed:
            cases: Dict[str, object] = r["cases"]  # type: ignore[assignment]
            cells = [f"{cases[k]:13.1f}" if isinstance(cases.get(k), float) else f"{'-':>13s}" for k in keys]
            verdicts = set(checks.get(r["variant"], {}).values())  # type: ignore[attr-defined]
            lines.append(f"{r['variant']:14s} " + " ".join(cells) + f"  {'/'.join(sorted(map(str, verdicts))) or '?'}")
    gemm = out / "gemm.jsonl"
    if gemm.exists():
        recs = [json.loads(x) for x in gemm.read_text().splitlines() if x.strip()]
        summary["gemm"] = [{k: r[k] for k in ("mode", "config", "tflops", "spread", "verified")} for r in recs]
        lines.append("")
        lines.append("gemm.smx in Chromium at 4096^3, TFLOP/s (checked: robustness on; trusted: off)")
        by: Dict[str, Dict[str, float]] = {}
        for r in recs:
            by.setdefault(r["config"], {})[r["mode"]] = r["tflops"]
        order = sorted(by, key=lambda c: -max(by[c].values()))
        lines.append(f"{'checked':>8s} {'trusted':>8s}  configuration")
        for c in order:
            cells = [f"{by[c][m]:8.1f}" if m in by[c] else f"{'-':>8s}" for m in ("checked", "trusted")]
            lines.append(" ".join(cells) + "  " + c)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
