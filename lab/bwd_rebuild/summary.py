"""The sweep's table: every kernel's time at each shape and mode, against the series' baseline
timed in the same series (varlen_bwd.smx_loops, the kernel before its loops were written out, or
in burst S2's records varlen_bwd.smx_old, the kernel before the rebuild), and the conformance
grid's verdict per kernel.

    python3 -m lab.bwd_rebuild.summary RECORDS.jsonl [REPORT.json] [--md]

RECORDS.jsonl: the suite's records of every stage (device.sh gathers them), one a line, each
with its `stage`; REPORT.json: the stages' reports (the grid's verdicts are in stage "grid").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

BASELINES = ("varlen_bwd.smx_loops", "varlen_bwd.smx_old")  # the first a series holds is its baseline
TARGETS = {64: 51.0, 128: 56.0}  # TFLOP/s the rebuild aims at (0.6 of the forward's)


def table(records: List[dict], md: bool = False) -> str:
    base: Dict[Tuple[str, str, str, str], dict] = {}
    for name in reversed(BASELINES):
        for r in records:
            if r["impl"] == name:
                base[(r["stage"], ",".join(map(str, r["shape"])), r["runtime"], r["mode"])] = r
    rows = []
    for r in sorted(records, key=lambda r: (r["shape"][3], r["runtime"], r["mode"], -r["tflops"])):
        shape = ",".join(map(str, r["shape"]))
        b = base.get((r["stage"], shape, r["runtime"], r["mode"]))
        vs = f"{b['median_ms'] / r['median_ms']:.2f}x" if b else "-"
        goal = TARGETS.get(r["shape"][3]) if r["impl"].startswith("varlen_bwd.smx") else None
        rows.append(
            [
                f"({shape})",
                f"{r['runtime']} {r['mode']}",
                r["impl"],
                f"{r['median_ms']:.3f}",
                f"{r['tflops']:.1f}" + ("!" if r.get("wide") else ""),
                vs,
                f"{r['tflops'] / goal:.2f}" if goal else "-",
                r.get("config", ""),
            ]
        )
    head = ["shape", "runtime", "kernel", "ms", "TFLOP/s", "vs base", "of target", "config"]
    if md:
        lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(x) + " |" for x in rows])
    widths = [max(len(x[i]) for x in [head] + rows) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*x) for x in [head] + rows) + (
        "\n(vs base: the baseline's time over this one's, same series; of target: TFLOP/s over 51 (D 64) or 56 (D 128); "
        "! = a spread over 5%)"
    )


def grid(report: dict) -> str:
    """Per kernel: cases passed of run, the worst |err| / allowance, the failures named."""
    got = (report.get("grid") or {}).get("chromium_checked", {}).get("grid", {}).get("varlen_bwd")
    if not got:
        return "grid: not run or cut short (see log.txt)"
    if "error" in got:
        return f"grid: {got['error']}"
    per: Dict[str, List[dict]] = {}
    for c in got.get("cases", []):
        per.setdefault(c["kernel"], []).append(c)
    lines = [f"grid varlen_bwd ({got.get('wall_s')} s): {got.get('passed')} passed, {got.get('failed')} failed"]
    for kernel, cases in per.items():
        worst = max((c["worst"] for c in cases), default=float("nan"))
        bad = [c["case"] for c in cases if not c["pass"]]
        verdict = f"  {kernel}: {len(cases) - len(bad)} of {len(cases)} pass, worst {worst:.3g}"
        lines.append(verdict + (f"; FAIL {bad}" if bad else ""))
    lines += [f"  skipped {s['kernel']}: {s['reason']}" for s in got.get("skipped", [])]
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records")
    ap.add_argument("report", nargs="?")
    ap.add_argument("--md", action="store_true", help="a Markdown table")
    args = ap.parse_args(argv)
    records = [json.loads(line) for line in Path(args.records).read_text().splitlines() if line.strip()]
    print(table(records, args.md))
    report: Optional[dict] = json.loads(Path(args.report).read_text()) if args.report else None
    if report is not None:
        print()
        print(grid(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
