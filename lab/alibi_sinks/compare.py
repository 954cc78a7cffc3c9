"""What ALiBi and sinks cost a kernel: each record of a variant against the plain record of the same
kernel, shape, runtime, mode and repeat (timed in the same series by bench.suite --variants).

    python -m lab.alibi_sinks.compare OUT/records.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List, Tuple

TARGET = 1.05  # the forward with ALiBi and sinks within 5% of the same kernel without them


def pairs(records: List[Dict]) -> List[Tuple[Dict, Dict]]:
    """(plain, variant) records of one series entry, variant records in their order."""

    def where(r: Dict) -> Tuple:
        return (r["op"], r["impl"], tuple(r["shape"]), r["causal"], r["runtime"], r["mode"], r["repeat"])

    plain = {where(r): r for r in records if not r.get("variant")}
    return [(plain[where(r)], r) for r in records if r.get("variant") and where(r) in plain]


def table(records: List[Dict]) -> str:
    lines = [
        f"{'op':4s} {'impl':24s} {'shape':16s} {'runtime':9s} {'mode':8s} {'variant':12s} {'plain ms':>9s} {'IQR':>6s} "
        f"{'variant ms':>10s} {'IQR':>6s} {'ratio':>6s}  verdict"
    ]
    for a, b in pairs(records):
        ratio = b["median_ms"] / a["median_ms"]
        spread = max(a["spread"], b["spread"])
        verdict = "within 5%" if ratio <= TARGET else "over 5%"
        if spread > TARGET - 1:
            verdict += f" (spread {100 * spread:.0f}%: read with care)"
        lines.append(
            f"{a['op']:4s} {a['impl']:24s} {','.join(map(str, a['shape'])):16s} {a['runtime']:9s} {a['mode']:8s} "
            f"{b['variant']:12s} {a['median_ms']:9.4f} {100 * a['spread']:5.1f}% {b['median_ms']:10.4f} "
            f"{100 * b['spread']:5.1f}% {ratio:6.3f}  {verdict}"
        )
    if len(lines) == 1:
        lines.append("(no variant record has a plain record beside it)")
    return "\n".join(lines)


def main(argv: List[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    print(table(json.loads(Path(argv[0]).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
