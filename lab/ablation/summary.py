"""The ablation's table: each variant's time against the registered kernel timed in the same
series (same suite run, same shape, same browser pass), and the share of the kernel's time the
removed part accounts for.

    python3 -m lab.ablation.summary RECORDS.jsonl --base KERNEL [--md]

RECORDS.jsonl: the suite's records of every group run (device.sh gathers them), one a line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple


def rows(records: List[dict], base_id: str) -> List[Tuple[str, str, str, float, float, float, float, bool]]:
    """(part, shape, mode, ms, TFLOP/s, base ms, share of base time saved, wide) per variant record;
    the base is the registered kernel of the same group, shape and mode."""
    base: Dict[Tuple[int, str, str], dict] = {}
    for r in records:
        if r["impl"] == base_id:
            base[(r["group"], ",".join(map(str, r["shape"])), r["mode"])] = r
    out = []
    for r in records:
        shape = ",".join(map(str, r["shape"]))
        b = base.get((r["group"], shape, r["mode"]))
        if b is None:
            continue
        part = "as registered" if r["impl"] == base_id else r["impl"][len(base_id + "_abl_") :]
        saved = (b["median_ms"] - r["median_ms"]) / b["median_ms"]
        out.append((part, shape, r["mode"], r["median_ms"], r["tflops"], b["median_ms"], saved, bool(r["wide"] or b["wide"])))
    return out


def table(records: List[dict], base_id: str, md: bool = False) -> str:
    got = rows(records, base_id)
    shapes = sorted({s for _, s, *_ in got}, key=lambda s: [int(x) for x in s.split(",")][::-1])  # by head dim
    modes = [m for m in ("checked", "trusted") if any(r[2] == m for r in got)]  # the passes that ran
    cells: Dict[Tuple[str, str, str], Tuple[float, float, float, bool]] = {}
    order: List[str] = []
    for part, shape, mode, ms, tf, base_ms, saved, wide in got:
        if part == "as registered" and (part, shape, mode) in cells:
            continue  # the base of every group: the first is shown
        cells[(part, shape, mode)] = (ms, tf, saved, wide)
        if part not in order:
            order.append(part)
    head = ["part removed"] + [f"({s}) {m}" for s in shapes for m in modes]
    lines = []
    for part in order:
        row = [part]
        for s in shapes:
            for m in modes:
                c = cells.get((part, s, m))
                if c is None:
                    row.append("-")
                elif part == "as registered":
                    row.append(f"{c[0]:.3f} ms {c[1]:.1f} TF{'!' if c[3] else ''}")
                else:
                    row.append(f"{c[0]:.3f} ms {c[1]:.1f} TF {c[2]:+.0%}{'!' if c[3] else ''}")
        lines.append(row)
    if md:
        out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        out += ["| " + " | ".join(r) + " |" for r in lines]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in [head] + lines) for i in range(len(head))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in [head] + lines) + (
        "\n(+x%: the share of the registered kernel's time, same group, shape and pass, that removing the part saves; "
        "checked = robustness on, trusted = off; ! = a spread over 5%)"
    )


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("records")
    ap.add_argument("--base", required=True, help="the registered kernel the variants were made of")
    ap.add_argument("--md", action="store_true", help="a Markdown table")
    args = ap.parse_args(argv)
    records = [json.loads(line) for line in Path(args.records).read_text().splitlines() if line.strip()]
    print(table(records, args.base, args.md))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
