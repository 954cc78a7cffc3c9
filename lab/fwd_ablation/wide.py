"""flash_fwd.smx_wide (head dims past 256: the head dim split over four subgroups a row block) with
one part of its key-tile loop removed at a time (lab/ablation), as variants.py does for
flash_fwd.smx: registered beside it so that the benchmark suite times them at D = 512.

    python3 -m lab.fwd_ablation.wide apply | groups | revert | list
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List

from lab import ablation as ab

ROOT = Path(__file__).resolve().parents[2]
BASE = "flash_fwd.smx_wide"
RANK0 = -40  # below every registered flash_fwd kernel and flash_fwd.smx's variants

REGIONS: ab.Regions = {"loop": ("for (var t0 = last; t0 < band.y && t0 >= band.x; t0 -= i32(BC)) {", "// Row sums, the sink")}
STORE = ("store_one(lid + WG * {f}u, k{f}, false);", "store_one(lid + WG * {f}u, v{f}, true);")
FETCH = (
    "k{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, false);  // in flight until the next tile",
    "v{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, true);  // in flight until the next tile",
)
S_MMA = "acc = subgroupMatrixMultiplyAccumulate(q{c}, kt, acc);"
S_STORE = "subgroupMatrixStore<row_major>(&sf[(part * RB + fb) * SB + {n}u], 0u, acc, SP4);"
PV_MMA = "o{cl} = subgroupMatrixMultiplyAccumulate(p, vt, o{cl});"
S_READ = "s += sf[{p}u * RB * SB + at.x][at.y];"
P_STORE = "pf[at.x][at.y] = vec4<f16>(p);"
FLAG = "if (workgroupUniformLoad(&rescale[0]) != 0u) {"


def drop(text: str, *lines: str) -> str:
    return ab.drop_lines(text, REGIONS, "loop", *lines)


def sub(text: str, old: str, new: str) -> str:
    return ab.sub(text, REGIONS, "loop", old, new)


def no_flag(text: str) -> str:
    return sub(text, FLAG, "if (params.batch_size == 0u) {")  # false on every benchmark shape, not folded


# Barriers of the loop, in order: 1 K staged, 2 the partial S stored, 3-5 the rescale's (rare),
# 6 the tile's end; the flag's uniform load publishes P and V.
PARTS: Dict[str, ab.Variant] = {
    "noload": (
        "K and V not read from memory (zeros staged)",
        lambda t: sub(t, "select(band.y, next, next < band.x);", "next;"),
    ),
    "nostage": ("the staging of K and V (fetch and store)", lambda t: drop(t, *STORE, *FETCH)),
    "no_s": ("the products of the partial S (stored as zeros)", lambda t: drop(t, S_MMA)),
    "no_pv": ("the products of O += P V", lambda t: drop(t, PV_MMA)),
    "nomma": ("both products", lambda t: drop(t, S_MMA, PV_MMA)),
    "no_s_sum": ("the softmax's reads of the partial S", lambda t: drop(t, S_READ)),
    "no_p_store": ("the softmax's stores of P", lambda t: drop(t, P_STORE)),
    "bar1": ("the barrier after K's staging", lambda t: ab.drop_barrier(t, REGIONS, "loop", 1)),
    "bar2": ("the barrier after the partial S", lambda t: ab.drop_barrier(t, REGIONS, "loop", 2)),
    "flag": ("the rescale flag's uniform load (the barrier that publishes P and V) and the rescale", no_flag),
    "bar_end": ("the barrier closing the tile", lambda t: ab.drop_barrier(t, REGIONS, "loop", 6)),
    "nobar": ("every barrier of the tile (and the rescale)", lambda t: ab.all_barriers(no_flag(t), REGIONS, "loop")),
    "empty": ("the whole tile loop", lambda t: ab.empty_loop(t, REGIONS, "loop", "\n  }\n")),
}
GROUPS: List[List[str]] = [list(PARTS)]
ABLATION = ab.Ablation(BASE, "lab/fwd_ablation/wide.py", RANK0, PARTS, GROUPS)


def main(argv: List[str]) -> int:
    return ABLATION.main(argv, ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
