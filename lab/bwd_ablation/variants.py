"""varlen_bwd.smx with one part removed at a time, written into a working tree as extra registered
kernels so that the benchmark suite times them beside the kernel as registered (outputs wrong:
speed only).

    python3 -m lab.bwd_ablation.variants apply     # shaders/varlen_bwd.smx_abl_<part>.wgsl + manifest entries
    python3 -m lab.bwd_ablation.variants groups    # the kernel lists device.sh times, one suite run each
    python3 -m lab.bwd_ablation.variants revert    # removes both again

`apply` reads shaders/varlen_bwd.smx.wgsl as it is in the tree, applies each part's edits (every
edit must match exactly once inside its region, or apply stops and says which: the edits follow
the kernel's text) and registers each variant as a copy of varlen_bwd.smx's manifest entry under
its own id and a rank below the registered kernel's (the page and the API never prefer it). The
benchmark does not check outputs (only the decode benchmark does), so the variants are timed like
any kernel. Nothing in the product reads this folder; the variants exist only in a tree where
`apply` ran (the coordinator's, before `python3 -m bench.devcarry pack`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict, List, Tuple

from lab import ablation as ab

ROOT = Path(__file__).resolve().parents[2]
BASE = "varlen_bwd.smx"
RANK0 = 21  # variants take ranks RANK0, RANK0 + 1, ...: below varlen_bwd.smx (60), above .tiled (20)

# Regions of the kernel an edit is confined to: (first marker, end marker).
REGIONS: ab.Regions = {
    "dkdv": ("for (var t0 = qlo; t0 < qhi; t0 += i32(BT)) {", "// dk, then dv"),
    "dq": ("for (var t0 = band.x; t0 < band.y; t0 += i32(BT)) {", "// dq through ra"),
    "dkdv_fn": ("fn bwd_dkdv(", "fn bwd_dq("),
    "dq_fn": ("fn bwd_dq(", "\x00end"),
    "pre_fn": ("fn bwd_preprocess(", "fn bwd_dkdv("),
}


def sub(text: str, where: str, old: str, new: str) -> str:
    return ab.sub(text, REGIONS, where, old, new)


def drop_lines(text: str, where: str, *lines: str) -> str:
    return ab.drop_lines(text, REGIONS, where, *lines)


def drop_barrier(text: str, where: str, k: int) -> str:
    return ab.drop_barrier(text, REGIONS, where, k)


def all_barriers(text: str, where: str) -> str:
    return ab.all_barriers(text, REGIONS, where)


def empty_loop(text: str, where: str) -> str:
    """The tile loop of region `where` with an empty body (the pass's set-up, its register loads
    and its final stores remain)."""
    return ab.empty_loop(text, REGIONS, where, "\n    }\n" if where == "dkdv" else "\n  }\n")


def early_return(text: str, where: str, first_line: str) -> str:
    """A return before `first_line` of an entry point: every workgroup of the pass returns at once
    (the condition is a runtime value, true on every benchmark shape, so nothing is folded)."""
    return sub(text, where, first_line, "if (params.batch_size > 0u) {\n    return;\n  }\n  " + first_line)


STAGE_Q = (
    "stage(0u, true, u32(q_start + t0), valid, h, hq, dim, lid);",
    "stage(3u, false, u32(q_start + t0), valid, h, hq, dim, lid);",
    "stage_stats(u32(q_start + t0), valid, h, lid);",
)
STAGE_KV = (
    "stage(1u, true, u32(k_start + t0), valid, kvh, hkv, dim, lid);",
    "stage(2u, false, u32(k_start + t0), valid, kvh, hkv, dim, lid);",
)
DKDV_S = "s = subgroupMatrixMultiplyAccumulate(kr[c], subgroupMatrixLoad<RF, col_major>(&ta[n * DC + c], 0u, P4), s);"
DKDV_DP = "dp = subgroupMatrixMultiplyAccumulate(vr[c], subgroupMatrixLoad<RF, col_major>(&tb[n * DC + c], 0u, P4), dp);"
DKDV_DV = "dv[cl] = subgroupMatrixMultiplyAccumulate(p, subgroupMatrixLoad<RF, row_major>(&tb[kk * DC + c], 0u, P4), dv[cl]);"
DKDV_DK = "dk[cl] = subgroupMatrixMultiplyAccumulate(ds, subgroupMatrixLoad<RF, row_major>(&ta[kk * DC + c], 0u, P4), dk[cl]);"
DQ_S = "s = subgroupMatrixMultiplyAccumulate(qr[c], subgroupMatrixLoad<RF, col_major>(&ta[n * DC + c], 0u, P4), s);"
DQ_DP = "dp = subgroupMatrixMultiplyAccumulate(dr[c], subgroupMatrixLoad<RF, col_major>(&tb[n * DC + c], 0u, P4), dp);"
DQ_DQ = (
    "dq_acc[cl] = subgroupMatrixMultiplyAccumulate(ds, subgroupMatrixLoad<RF, row_major>(&ta[kk * DC + c], 0u, P4), dq_acc[cl]);"
)
DKDV_GRADS = "tile_grads(j0, t0, true, true, len_q, len_k, offset, wl, wr, lid);"
DQ_GRADS = "tile_grads(row0, t0, false, false, len_q, len_k, offset, wl, wr, lid);"


def no_loads(text: str, where: str, calls: Tuple[str, ...]) -> str:
    """The tile's staging calls told that no row is valid: tiles and stats still written (zeros,
    EMPTY_LSE), nothing read from memory."""
    for call in calls:
        text = sub(text, where, call, call.replace("valid,", "0u,"))
    return text


# part -> (what is removed, edit)
PARTS: Dict[str, ab.Variant] = {
    # bwd_dkdv: a workgroup per key block, the tile loop over query tiles
    "dkdv_noload": (
        "dkdv: Q, dout, lse, delta not read from memory (tiles still written)",
        lambda t: no_loads(t, "dkdv", STAGE_Q),
    ),
    "dkdv_nostage": ("dkdv: no staging of Q, dout, lse, delta at all", lambda t: drop_lines(t, "dkdv", *STAGE_Q)),
    "dkdv_no_s": ("dkdv: the products of Sᵀ = K Qᵀ", lambda t: drop_lines(t, "dkdv", DKDV_S)),
    "dkdv_no_dp": ("dkdv: the products of dPᵀ = V doutᵀ", lambda t: drop_lines(t, "dkdv", DKDV_DP)),
    "dkdv_no_dv": ("dkdv: the products of dV += Pᵀ dout", lambda t: drop_lines(t, "dkdv", DKDV_DV)),
    "dkdv_no_dk": ("dkdv: the products of dK += dSᵀ Q", lambda t: drop_lines(t, "dkdv", DKDV_DK)),
    "dkdv_nomma": ("dkdv: all four products", lambda t: drop_lines(t, "dkdv", DKDV_S, DKDV_DP, DKDV_DV, DKDV_DK)),
    "dkdv_nograds": ("dkdv: P and dS (elementwise: visibility, exp, softcap)", lambda t: drop_lines(t, "dkdv", DKDV_GRADS)),
    "dkdv_bar1": ("dkdv: the barrier after staging", lambda t: drop_barrier(t, "dkdv", 1)),
    "dkdv_bar2": ("dkdv: the barrier after Sᵀ, dPᵀ", lambda t: drop_barrier(t, "dkdv", 2)),
    "dkdv_bar3": ("dkdv: the barrier after P, dS", lambda t: drop_barrier(t, "dkdv", 3)),
    "dkdv_bar4": ("dkdv: the barrier closing the tile", lambda t: drop_barrier(t, "dkdv", 4)),
    "dkdv_nobar": ("dkdv: all four barriers of the tile loop", lambda t: all_barriers(t, "dkdv")),
    "dkdv_empty": ("dkdv: the whole tile loop (set-up, K and V fragments, stores remain)", lambda t: empty_loop(t, "dkdv")),
    # bwd_dq: a workgroup per query block, the tile loop over key tiles
    "dq_noload": ("dq: K, V not read from memory (tiles still written)", lambda t: no_loads(t, "dq", STAGE_KV)),
    "dq_nostage": ("dq: no staging of K, V at all", lambda t: drop_lines(t, "dq", *STAGE_KV)),
    "dq_no_s": ("dq: the products of S = Q Kᵀ", lambda t: drop_lines(t, "dq", DQ_S)),
    "dq_no_dp": ("dq: the products of dP = dout Vᵀ", lambda t: drop_lines(t, "dq", DQ_DP)),
    "dq_no_dq": ("dq: the products of dQ += dS K", lambda t: drop_lines(t, "dq", DQ_DQ)),
    "dq_nomma": ("dq: all three products", lambda t: drop_lines(t, "dq", DQ_S, DQ_DP, DQ_DQ)),
    "dq_nograds": ("dq: dS (elementwise)", lambda t: drop_lines(t, "dq", DQ_GRADS)),
    "dq_bar1": ("dq: the barrier after staging", lambda t: drop_barrier(t, "dq", 1)),
    "dq_bar2": ("dq: the barrier after S, dP", lambda t: drop_barrier(t, "dq", 2)),
    "dq_bar3": ("dq: the barrier after dS", lambda t: drop_barrier(t, "dq", 3)),
    "dq_bar4": ("dq: the barrier closing the tile", lambda t: drop_barrier(t, "dq", 4)),
    "dq_nobar": ("dq: all four barriers of the tile loop", lambda t: all_barriers(t, "dq")),
    "dq_empty": ("dq: the whole tile loop", lambda t: empty_loop(t, "dq")),
    # whole passes
    "no_dq_pass": (
        "the dq pass (every workgroup returns at once)",
        lambda t: early_return(t, "dq_fn", "let hq = params.heads_q;"),
    ),
    "no_pre": ("the preprocess pass (delta)", lambda t: early_return(t, "pre_fn", "let e = gid.x + gid.y * nwg.x * 64u;")),
}

# One suite run per group (each with the registered kernel as its own baseline): a series holds
# every kernel of a group at once on the GPU (8 buffers of up to 64 MiB each), so groups stay small.
GROUPS: List[List[str]] = [
    [
        "no_dq_pass",
        "no_pre",
        "dkdv_empty",
        "dq_empty",
        "dkdv_nomma",
        "dq_nomma",
        "dkdv_nograds",
        "dq_nograds",
        "dkdv_nobar",
        "dq_nobar",
    ],
    [
        "dkdv_noload",
        "dkdv_nostage",
        "dkdv_no_s",
        "dkdv_no_dp",
        "dkdv_no_dv",
        "dkdv_no_dk",
        "dq_noload",
        "dq_nostage",
        "dq_no_s",
        "dq_no_dp",
    ],
    ["dq_no_dq", "dkdv_bar1", "dkdv_bar2", "dkdv_bar3", "dkdv_bar4", "dq_bar1", "dq_bar2", "dq_bar3", "dq_bar4"],
]
ABLATION = ab.Ablation(BASE, "lab/bwd_ablation/variants.py", RANK0, PARTS, GROUPS)
PREFIX = ABLATION.prefix


def main(argv: List[str]) -> int:
    return ABLATION.main(argv, ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
