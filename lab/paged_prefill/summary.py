"""The device script's table (lab/paged_prefill/device.sh): the prefill records by case, runtime and
mode (TFLOP/s, the share of flash_fwd on the same work, whether each output was checked), the
target's share against its goal, and the native checks: per kernel the cases passed, and the
worst error / allowance of the long-context and head_dim-512 rows.

    python3 -m lab.paged_prefill.summary OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import history

GOAL = 70.0  # % of flash_fwd.smx's TFLOP/s on the same work unpaged


def main(out: Path) -> int:
    lines = []
    path = out / "prefill.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    lines.append(history.prefill_table(records) or "prefill: no records (see log.txt)")
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    for mode in ("checked", "trusted"):
        p = report.get(f"chromium_{mode}", {})
        for b in p.get("bench", []):
            for s in b.get("skipped", []):
                lines.append(f"{b['request']} [{mode}]: skipped {s['impl']}: {s['reason']}")
            lines += [f"{b['request']} [{mode}]: FAILED {f}" for f in b.get("failed", [])]
        lines += [f"{f['request']} [{mode}]: {f['error']}" for f in p.get("failed_requests", [])]
        if p.get("error"):
            lines.append(f"chromium {mode}: {p['error']}")
    for r in records:
        if r["case"] == "target" and not r["yardstick"]:
            v = r["verified"] or {}
            lines.append(
                f"target {r['impl']} [{r['mode']}]: {r['tflops']:.3g} TFLOP/s, {r['pct_of_yardstick']:.0f}% of the yardstick "
                f"(goal >= {GOAL:.0f}%: {'met' if r['pct_of_yardstick'] >= GOAL else 'NOT met'}); "
                f"checked |err| {v.get('max_abs_err', float('nan')):.3g} <= {v.get('allowed', float('nan')):.3g}"
            )
    for name in ("check-prefill.json", "check-decode.json"):
        p = out / name
        if not p.exists() or not p.read_text().strip():
            lines.append(f"{name}: missing (see log.txt)")
            continue
        report = json.loads(p.read_text())
        lines.append(f"{name}: {report['adapter'].get('device') or report['adapter'].get('description')}")
        for k in report["kernels"]:
            long = [c for c in k["cases"] if c["name"].startswith(("long", "d512"))]
            worst = ", ".join(f"{c['name']} {c['max_abs_err'] / c['allowance']:.3g}" for c in long if c["allowance"])
            lines.append(f"  {k['kernel']}: {k['passed']} passed, {k['failed']} failed; err / allowance: {worst}")
            lines += [f"    FAIL {c['name']}: {c['failed_outputs']}" for c in k["cases"] if not c["pass"]]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
