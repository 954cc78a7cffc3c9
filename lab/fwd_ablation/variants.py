"""flash_fwd.smx with one part of its key-tile loop removed at a time (lab/ablation), written into a
working tree as extra registered kernels so that the benchmark suite times them beside the kernel
as registered (outputs wrong: speed only).

    python3 -m lab.fwd_ablation.variants apply     # shaders/flash_fwd.smx_abl_<part>.wgsl + manifest entries
    python3 -m lab.fwd_ablation.variants groups    # the kernel lists lab/ablation/device.sh times
    python3 -m lab.fwd_ablation.variants revert    # removes both again
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List

from lab import ablation as ab

ROOT = Path(__file__).resolve().parents[2]
BASE = "flash_fwd.smx"
RANK0 = -20  # variants take ranks -20, -19, ...: below every registered flash_fwd kernel

# The key-tile loop, from its head to the line after its end.
REGIONS: ab.Regions = {"loop": ("for (var t0 = last; t0 < band.y && t0 >= band.x; t0 -= i32(BC)) {", "// Row sums, the sink")}
STORE = ("store_one(lid + WG * {f}u, k{f}, false);", "store_one(lid + WG * {f}u, v{f}, true);")
FETCH = (
    "k{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, false);  // in flight until the next tile",
    "v{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, true);",
)
S_MMA = "acc{rr} = subgroupMatrixMultiplyAccumulate(q{rr}_{c}, kt, acc{rr});"
S_STORE = "subgroupMatrixStore<row_major>(&sf[(fb + {rr}u) * SB + n], 0u, acc{rr}, SP4);"
PV_MMA = "o{rr}_{cl} = subgroupMatrixMultiplyAccumulate(p{rr}, vt, o{rr}_{cl});"
S_READ = "var s = sf[at.x][at.y] * scale;"
P_STORE = "kf[at.x][at.y] = vec4<f16>(p);"
FLAG = "if (workgroupUniformLoad(&rescale[0]) != 0u) {"
NO_FLAG = "if (params.batch_size == 0u) {"  # false on every benchmark shape, not folded


def drop(text: str, *lines: str) -> str:
    return ab.drop_lines(text, REGIONS, "loop", *lines)


def sub(text: str, old: str, new: str) -> str:
    return ab.sub(text, REGIONS, "loop", old, new)


def bar(text: str, k: int) -> str:
    return ab.drop_barrier(text, REGIONS, "loop", k)


def no_flag(text: str) -> str:
    return sub(text, FLAG, NO_FLAG)


def no_softmax(text: str) -> str:
    return drop(sub(text, S_READ, "var s = vec4<f32>(scale);"), P_STORE)


# Barriers of the loop, in order: 1 K and V staged, 2 S stored, 3-5 the rescale's (rare), 6 the
# tile's end; the rescale flag's workgroupUniformLoad is the barrier that publishes P.
PARTS: Dict[str, ab.Variant] = {
    "noload": (
        "K and V not read from memory (the staging still stores zeros)",
        lambda t: sub(t, "select(band.y, next, next < band.x);", "next;"),
    ),
    "nostage": ("the staging of K and V (fetch and store)", lambda t: drop(t, *STORE, *FETCH)),
    "no_s": ("the products of S = Q Kᵀ (S stored as zeros)", lambda t: drop(t, S_MMA)),
    "no_s_all": ("S = Q Kᵀ and its store", lambda t: drop(t, S_STORE)),
    "no_pv": ("the products of O += P V (and their P, V loads)", lambda t: drop(t, PV_MMA)),
    "nomma": ("both products", lambda t: drop(t, S_MMA, PV_MMA)),
    "no_s_read": ("the softmax's reads of S", lambda t: sub(t, S_READ, "var s = vec4<f32>(scale);")),
    "no_p_store": ("the softmax's stores of P", lambda t: drop(t, P_STORE)),
    "no_softmax_io": ("the softmax's reads of S and stores of P", no_softmax),
    "bar1": ("the barrier after the staging", lambda t: bar(t, 1)),
    "bar2": ("the barrier after S", lambda t: bar(t, 2)),
    "flag": ("the rescale flag's uniform load (the barrier that publishes P) and the rescale", no_flag),
    "bar_end": ("the barrier closing the tile", lambda t: bar(t, 6)),
    "nobar": ("every barrier of the tile (and the rescale)", lambda t: ab.all_barriers(no_flag(t), REGIONS, "loop")),
    "empty": ("the whole tile loop", lambda t: ab.empty_loop(t, REGIONS, "loop", "\n  }\n")),
}
GROUPS: List[List[str]] = [
    ["empty", "nomma", "no_s", "no_s_all", "no_pv", "noload", "nostage"],
    ["no_s_read", "no_p_store", "no_softmax_io", "bar1", "bar2", "flag", "bar_end", "nobar"],
]
ABLATION = ab.Ablation(BASE, "lab/fwd_ablation/variants.py", RANK0, PARTS, GROUPS)


def main(argv: List[str]) -> int:
    return ABLATION.main(argv, ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
