"""flash_fwd.smx's candidates for one device call, written into a working tree as extra registered
kernels so that the benchmark suite times them beside the kernel as registered:

    python3 -m lab.coopmat_ceiling.fwd_candidates apply [--set SET]   # shaders/ files + manifest entries
    python3 -m lab.coopmat_ceiling.fwd_candidates kernels [--set SET] # the comma-separated ids to time
    python3 -m lab.coopmat_ceiling.fwd_candidates revert              # removes both again

SET is a device run's (SETS below: s3, s4, s4w-s6w, s9, s9w, s10, s12, s14, s16, s17, s19, s21, s23, s24, s25, s26). A
candidate is the registered kernel with other tiles, or an edited copy of its text; a set whose
edits no longer match the kernel (S10's and S12's padding, S14's interleaved softmax columns,
S17's and S19's row orders, since taken into the kernels) stops `apply` untouched.

The candidates of the S3 run (each at both benchmark shapes; the first tile that fits the adapter
is taken, so the later ones are for smaller adapters, lavapipe's 32 KiB among them; the S4 run's
are tile shapes of flash_fwd.smx itself, SETS says which):
    flash_fwd.smx_r2     flash_fwd.smx with two row blocks a matrix subgroup (RPS = 2: each Kᵀ and V
                         fragment loaded feeds two products, the GEMM's reuse) and every subgroup on
                         matrix work: the softmax's invocations per row halved with it (TPR), so the
                         workgroup is 256 invocations, not 512 (S2's RPS = 2 left half the subgroups
                         idle and capped every invocation at 128 registers). 8 row blocks, 32 keys a
                         tile, two subgroups a row block, at both head dims.
    (S3's other two, flash_fwd.smx_pipe and _pipe_r2, the key tiles software-pipelined, had a
    kernel of their own, flash_fwd.smx_pipe.wgsl; it lost 30-40% and predates ALiBi, sinks and the
    padding, so it is gone: git show e38eab3:lab/coopmat_ceiling/flash_fwd.smx_pipe.wgsl.)

Each is a copy of flash_fwd.smx's manifest entry under its own id, ranked below it (the page and
the API never prefer it). Only entries and files this script made are removed by `revert`, so
another helper's applied variants (the backward's) may sit beside them. The benchmark does not
check a dense op's outputs: each candidate passes flash_fwd's quick cases on the lavapipe test bed
(`bash bench/smx_testbed/testbed.sh check --kernel ID --cases quick` after `apply`), and the suite's
`--grid flash_fwd` runs the conformance grid on every registered flash_fwd kernel the adapter runs.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
SHADERS = ROOT / "shaders"
MANIFEST = SHADERS / "manifest.json"
BASE = "flash_fwd.smx"
TPR_ALL = "DS * SUBGROUP_SIZE // SGM_M // RPS"  # every subgroup on matrix work, RPS row blocks each
R2 = [  # two row blocks a subgroup; the 16-key tile for lavapipe (8-wide fragments: 2 of them)
    {"RB": 8, "BC": 32, "DS": 2, "RPS": 2},
    {"RB": 4, "BC": 16, "DS": 2, "RPS": 2},
]
LAST = [{"RB": 8, "BC": 16}, {"RB": 2, "BC": 16}]  # one row block a subgroup: every other head dim gets a plan
SETS = {  # set -> {id -> (template, tiles, the softmax's TPR or None for the registered rule)}
    "s3": {
        f"{BASE}_r2": (BASE, R2 + LAST, TPR_ALL),
    },
    # S4: more keys a tile at D = 64, where the registered 16 leave 8 products a subgroup between
    # four barriers (19 KiB of workgroup memory in use); at D = 128 the first two are the
    # registered tile with one and two subgroups a row block, the others do not fit (LAST).
    "s4": {
        f"{BASE}_b32": (BASE, [{"RB": 8, "BC": 32}, *LAST], None),
        f"{BASE}_b32d2": (BASE, [{"RB": 8, "BC": 32, "DS": 2}, *LAST], None),
        f"{BASE}_b64r4": (BASE, [{"RB": 4, "BC": 64}, *LAST], None),
        f"{BASE}_b64r4d2": (BASE, [{"RB": 4, "BC": 64, "DS": 2}, *LAST], None),
    },
}
# flash_fwd.smx_wide (head dims past 256) with its other row-block count: 2 (256 invocations, up
# to 255 registers a lane) where it had 4 (512 at 128), then 4 where it has 2 (32 keys a tile do
# not fit 48 KiB).
WIDE = "flash_fwd.smx_wide"
WIDE_LAST = [{"RB": 1, "BC": 16}, {"RB": 2, "BC": 8}, {"RB": 1, "BC": 8}]
SETS["s4w"] = {f"{WIDE}_r2": (WIDE, [{"RB": 2, "BC": 16}, *WIDE_LAST], None)}
SETS["s5w"] = {f"{WIDE}_r4": (WIDE, [{"RB": 4, "BC": 16}, *WIDE_LAST], None)}
# 3 row blocks (384 invocations, up to 168 registers a lane): half again the rows that share a
# staged tile at 2 (at D = 512 the K and V a tile brings in from L2 per FLOP bound the kernel),
# without 4's 128 registers; 8 keys a tile on lavapipe (32 KiB), so that the bed runs it.
SETS["s6w"] = {f"{WIDE}_r3": (WIDE, [{"RB": 3, "BC": 16}, {"RB": 3, "BC": 8}, *WIDE_LAST], None)}
# S9: the registered kernel on other row-block counts with 16-key tiles: 4 (128 invocations at
# D = 64: smaller workgroups, more of them an SM to cover each other's barriers) and 16 (512: a
# staged tile shared by twice the rows).
SETS["s9"] = {
    f"{BASE}_r4b16": (BASE, [{"RB": 4, "BC": 16}, *LAST], None),
    f"{BASE}_r16b16": (BASE, [{"RB": 16, "BC": 16}, *LAST], None),
}
# 8 subgroups a row block, each 64 of the head dim (DS = 8): half the O, Q and prefetch registers a
# lane of DS = 4, so 2 row blocks take 512 invocations (16 warps an SM to hide a phase's latency,
# not 8); the softmax sums 8 partial S instead of 4. 46,608 bytes at D = 512: the 8 partial S of
# 3 or 4 row blocks do not fit 48 KiB.
SETS["s9w"] = {f"{WIDE}_d8": (WIDE, [{"RB": 2, "BC": 16, "DS": 8}, *WIDE_LAST], None)}
# S10: the fragment arrays that K and V are staged into, each fragment padded by 32 bytes. A
# fragment of 16 rows of 48 bytes is 768 bytes, a multiple of the 128 bytes of workgroup memory's
# 32 banks, so every fragment starts at bank 0, and the staging's stores, whose lanes run along
# the head dim (a warp's 32 vec4 columns: 8 fragments, 4 columns each), put the 16 lanes of a
# store's half-warp on 8 banks: a 4-way conflict. 32 bytes more a fragment start them 8 banks
# apart: 16 lanes on 32 banks. The same values in the same places otherwise.
PAD = "FR * FP4 + 4u"
SETS["s10"] = {
    f"{WIDE}_pad": (
        WIDE,
        [{"RB": 2, "BC": 16}, *WIDE_LAST],
        None,
        [
            (
                "var<workgroup> kv: array<array<vec4<f16>, FR * FP4>, KVN>;",
                "var<workgroup> kv: array<array<vec4<f16>, FR * FP4 + 4u>, KVN>;",
            )
        ],
    ),
    f"{BASE}_pad": (
        BASE,
        None,
        None,
        [
            (
                "var<workgroup> vf: array<array<vec4<f16>, SK * NP4>, PB * DN>;",
                "var<workgroup> vf: array<array<vec4<f16>, SK * NP4 + 4u>, PB * DN>;",
            ),
            (
                "var<workgroup> kf: array<array<vec4<f16>, max(SM, SN) * KP4>, KPF>;",
                "var<workgroup> kf: array<array<vec4<f16>, max(SM, SN) * KP4 + 4u>, KPF>;",
            ),
        ],
    ),
}
# S12: the same padding where else a fragment array is 128-byte aligned: flash_fwd.smx's S (f32
# fragments of 16 rows of 80 bytes, 1,280 bytes), read by the softmax's lanes across two
# fragments at D = 128; the backward's staged tiles (its f16 fragments, 768 bytes, stored as
# flash_fwd's K and V were) and its f32 score fragments.
SETS["s12"] = {
    f"{BASE}_spad": (
        BASE,
        None,
        None,
        [
            (
                "var<workgroup> sf: array<array<vec4<f32>, SM * SP4>, RB * SB>;",
                "var<workgroup> sf: array<array<vec4<f32>, SM * SP4 + 4u>, RB * SB>;",
            )
        ],
    ),
    "varlen_bwd.smx_pad": (
        "varlen_bwd.smx",
        None,
        None,
        [("alias FragH = array<vec4<f16>, S * P4>;", "alias FragH = array<vec4<f16>, S * P4 + 4u>;")],
    ),
    "varlen_bwd.smx_pad2": (
        "varlen_bwd.smx",
        None,
        None,
        [
            ("alias FragH = array<vec4<f16>, S * P4>;", "alias FragH = array<vec4<f16>, S * P4 + 4u>;"),
            ("alias FragF = array<vec4<f32>, S * F4>;", "alias FragF = array<vec4<f32>, S * F4 + 4u>;"),
        ],
    ),
}
# S14: the round trip of S through workgroup memory with fewer bank conflicts. `_il` keeps S
# row-major and interleaves the softmax's vec4 columns (a row's lanes on neighbouring 16 bytes):
# since taken into the kernels, so the set no longer applies. Its other candidates, S stored
# column-major and read as scalars (`_cm`, `_cmb32`: lost 1-2%), had a kernel text of their own:
# git show 2063500:lab/coopmat_ceiling/flash_fwd.smx_cm.wgsl.
SETS["s14"] = {
    f"{BASE}_il": (
        BASE,
        None,
        None,
        [
            ("  let c0 = (lid % TPR) * CPI;\n", "  let c0 = (lid % TPR) * 4u;\n"),
            (
                "      let col = c0 + 4u * {c4}u;\n      let at = frag_at(r, col, SM, SN, SP4, SB);",
                "      let col = c0 + 4u * TPR * {c4}u;\n      let at = frag_at(r, col, SM, SN, SP4, SB);",
            ),
            (
                "      let at = frag_at(r, c0 + 4u * {c4}u, SM, SK, KP4, PB);",
                "      let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SK, KP4, PB);",
            ),
            (
                "          let at = frag_at(r, c0 + 4u * {c4}u, SM, SN, SP4, SB);\n          sf[at.x][at.y] *= alpha;",
                "          let at = frag_at(r, c0 + 4u * TPR * {c4}u, SM, SN, SP4, SB);\n          sf[at.x][at.y] *= alpha;",
            ),
            (
                "        let col = c0 + 4u * c4;\n        let d = ch * BC + col;",
                "        let col = c0 + 4u * TPR * c4;\n        let d = ch * BC + col;",
            ),
        ],
    ),
}
# S16: K and V staged without the register prefetch (each tile's loads stored at once, their
# latency no longer hidden behind the tile before): 8 registers fewer a lane at D = 64 (16 at
# D = 128). Whether fewer registers let a third 256-invocation workgroup onto an SM at D = 64
# (S4's 32 keys a tile lost 22%, as if the registers they add left one workgroup an SM); on the
# registered tiles and on 32 keys a tile at D = 64.
NO_PREFETCH = [
    (
        """#for f MAX_KVPI
  var k{f} = fetch_one(last, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, false);
  var v{f} = fetch_one(last, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, true);
#endfor
""",
        "",
    ),
    (
        """    store_one(lid + WG * {f}u, k{f}, false);
    store_one(lid + WG * {f}u, v{f}, true);
    k{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, false);  // in flight until the next tile
    v{f} = fetch_one(next, next_hi, k_start, hkv, kvh, dim, lid + WG * {f}u, true);
""",
        """    let k{f} = fetch_one(t0, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, false);
    let v{f} = fetch_one(t0, band.y, k_start, hkv, kvh, dim, lid + WG * {f}u, true);
    store_one(lid + WG * {f}u, k{f}, false);
    store_one(lid + WG * {f}u, v{f}, true);
""",
    ),
]
SETS["s16"] = {
    f"{BASE}_npf": (BASE, None, None, NO_PREFETCH),
    f"{BASE}_npfb32": (BASE, [{"RB": 8, "BC": 32, "DS": "min(2, ceil_div(head_dim, 64))"}, *LAST], None, NO_PREFETCH),
}
# S17: the softmax's rows permuted within each aligned block of 8 so that the 16-byte reads of S
# meet no bank twice. A quarter-warp's 8 lanes read 4 rows at D = 64 (TPR = 2) and 2 at D = 128
# (TPR = 4), each row's lanes 8 or 16 neighbouring words of S's rows of 20 words: rows 0-3 start
# at banks 0, 20, 8, 28 (rows 0 and 3 overlap), rows 0, 2, 4, 6 at 0, 8, 16, 24; at D = 128 rows g
# and g + 1 overlap, g and g + 4 do not. P's 8-byte writes (a half-warp: 8 rows at D = 64, the
# same 8 in another order) stay as they are. Since taken into flash_fwd.smx.
ROW_PERMUTATION = [
    (
        """#include "lib/flash_fwd_smx_loads.wgsl"
""",
        """#include "lib/flash_fwd_smx_loads.wgsl"

// The softmax's row for its k-th group of TPR lanes: a permutation of each aligned block of 8.
fn softmax_row(k: u32) -> u32 {
  if (TPR == 2u) {  // quarter-warps on rows 0, 2, 4, 6 | 1, 3, 5, 7
    return (k & ~7u) | ((k & 3u) << 1u) | ((k >> 2u) & 1u);
  }
  if (TPR == 4u) {  // quarter-warps on rows g, g + 4
    return (k & ~7u) | ((k >> 1u) & 3u) | ((k & 1u) << 2u);
  }
  return k;
}
""",
    ),
    ("  let r = lid / TPR;\n", "  let r = softmax_row(lid / TPR);\n"),
]
SETS["s17"] = {f"{BASE}_perm": (BASE, None, None, ROW_PERMUTATION)}
# S19: the backward's elementwise passes (P and dS from the f32 Sᵀ and dPᵀ, dS from S and dP)
# read their rows in lib/bank_rows.wgsl's order: 4 lanes a row of 16 columns, so that a
# quarter-warp's two rows are g and g + 4 (rows g and g + 1 share 4 banks). Since taken into
# varlen_bwd.smx.
BWD_ROWS = [
    ('#include "lib/frag_pad.wgsl"\n', '#include "lib/frag_pad.wgsl"\n#include "lib/bank_rows.wgsl"\n'),
    ("        let jj = e / (BT / 4u);\n", "        let jj = bank_row(e / (BT / 4u), BT / 4u);\n"),
    ("        let ii = e / (BT / 4u);\n", "        let ii = bank_row(e / (BT / 4u), BT / 4u);\n"),
]
SETS["s19"] = {"varlen_bwd.smx_rows": ("varlen_bwd.smx", None, None, BWD_ROWS)}
# S20's candidate, the key tiles software-pipelined at one barrier a tile (two buffers of Kᵀ, V,
# P and S: 46 KiB at D = 64, past the workgroup-memory step; 52.3 against 88.0), had a kernel text
# of its own: git show a6f80d3:lab/coopmat_ceiling/flash_fwd.smx_p1.wgsl.
# S21: Q in workgroup memory for the whole kernel, its fragments loaded for each tile's S, not held
# in registers (16 of them a lane at D = 64). vkstats (S20) read flash_fwd.smx at 113 registers a
# lane at D = 64: two 256-invocation workgroups an SM; three need 80 or fewer. On 8 row blocks
# (256 invocations) and 4 (128: five workgroups an SM at 96 registers or fewer).
Q_SHARED = [
    (
        "var<workgroup> sf: array<array<vec4<f32>, SM * SP4>, RB * SB>;",
        "var<workgroup> sf: array<array<vec4<f32>, SM * SP4>, RB * SB>;\n"
        "var<workgroup> qf: array<array<vec4<f16>, SM * KP4 + FRAG_PAD4>, RB * DK>;  // Q, all of it",
    ),
    (
        """#for rr RPS
#for c MAX_DK
  var q{rr}_{c}: LF;  // row block fb + {rr}'s fragment {c}
#endfor
#endfor
  for (var ch = 0u; ch < (DK + PB - 1u) / PB; ch++) {
    for (var f = 0u; f < QPI; f++) {
      let e = lid + WG * f;
      if (e < BR * BC / 4u) {
        let rr = e / (BC / 4u);
        let col = (e % (BC / 4u)) * 4u;
        var x = vec4<f32>(0.0);
        if (row0 + i32(rr) <= row_last) {
          x = load_q(u32(q_start + row0 + i32(rr)) * hq + head, (ch * BC + col) / 4u, dim);
        }
        let at = frag_at(rr, col, SM, SK, KP4, PB);
        kf[at.x][at.y] = vec4<f16>(x);
      }
    }
    workgroupBarrier();
    if (mx) {
#for rr RPS
#for c MAX_DK
      if ({c}u / PB == ch) {
        q{rr}_{c} = subgroupMatrixLoad<LF, row_major>(&kf[(fb + {rr}u) * PB + {c}u % PB], 0u, KP4);
      }
#endfor
#endfor
    }
    workgroupBarrier();
  }
""",
        """  for (var e = lid; e < BR * DP / 4u; e += WG) {
    let rr = e / (DP / 4u);
    let col = (e % (DP / 4u)) * 4u;
    var x = vec4<f32>(0.0);
    if (row0 + i32(rr) <= row_last) {
      x = load_q(u32(q_start + row0 + i32(rr)) * hq + head, col / 4u, dim);
    }
    let at = frag_at(rr, col, SM, SK, KP4, DK);
    qf[at.x][at.y] = vec4<f16>(x);
  }
""",
    ),
    (
        "          acc{rr} = subgroupMatrixMultiplyAccumulate(q{rr}_{c}, kt, acc{rr});",
        "          acc{rr} = subgroupMatrixMultiplyAccumulate("
        "subgroupMatrixLoad<LF, row_major>(&qf[(fb + {rr}u) * DK + {c}u], 0u, KP4), kt, acc{rr});",
    ),
]
Q_TILES = [{"RB": 8, "BC": 16}, *LAST]
SETS["s21"] = {
    f"{BASE}_qs": (BASE, Q_TILES, None, Q_SHARED),
    f"{BASE}_qs4": (BASE, [{"RB": 4, "BC": 16}, *LAST], None, Q_SHARED),
    f"{BASE}_qsnpf": (BASE, Q_TILES, None, Q_SHARED + NO_PREFETCH),  # and 8 registers fewer again
}


# S23: is workgroup memory itself the cost? S20's and S21's candidates at D = 64 (pipelined, Q
# shared, Q shared on 4 row blocks) each lost 35-40% with 2 (or 4) workgroups an SM as before, and
# each took 91-97 KiB of workgroup memory an SM against the registered kernel's 40. The kernel as
# registered with an unused workgroup array beside it (read once, never in practice: not removed)
# of 26 KiB (45 KiB in all) and 12 KiB (32 KiB). And `_db`: Kᵀ/P and V in two buffers by tile
# parity, so that the tile's last barrier goes (the next tile's staging writes the other buffer).
def _pad(words: int) -> list:
    return [
        (
            "var<workgroup> rescale: array<atomic<u32>, 4>;",
            f"var<workgroup> rescale: array<atomic<u32>, 4>;\nvar<workgroup> unused: array<vec4<f32>, {words // 4}>;",
        ),
        (
            "          out[row * (dim / 4u) + d / 4u] = y;",
            f"          out[row * (dim / 4u) + d / 4u] = y + select(vec4<f32>(0.0), unused[lid % {words // 4}u], dim == 12345u);",
        ),
    ]


DOUBLE = [
    (
        "var<workgroup> vf: array<array<vec4<f16>, SK * NP4 + FRAG_PAD4>, PB * DN>;",
        "var<workgroup> vf: array<array<vec4<f16>, SK * NP4 + FRAG_PAD4>, 2 * PB * DN>;",
    ),
    (
        "var<workgroup> kf: array<array<vec4<f16>, max(SM, SN) * KP4 + FRAG_PAD4>, KPF>;",
        "var<workgroup> kf: array<array<vec4<f16>, max(SM, SN) * KP4 + FRAG_PAD4>, 2 * KPF>;",
    ),
    ("fn store_one(e: u32, x: KVT, to_v: bool) {", "fn store_one(e: u32, x: KVT, to_v: bool, par: u32) {"),
    ("      vf[va.x][va.y] = vec4<f16>(x);", "      vf[par * PB * DN + va.x][va.y] = vec4<f16>(x);"),
    ("      kf[ka.x][ka.y] = vec4<f16>(x);", "      kf[par * KPF + ka.x][ka.y] = vec4<f16>(x);"),
    (
        "    let next_hi = select(band.y, next, next < band.x);  // past the first tile: nothing to fetch\n",
        "    let next_hi = select(band.y, next, next < band.x);  // past the first tile: nothing to fetch\n"
        "    let par = u32((last - t0) / i32(BC)) % 2u;  // this tile's buffers\n",
    ),
    ("    store_one(lid + WG * {f}u, k{f}, false);", "    store_one(lid + WG * {f}u, k{f}, false, par);"),
    ("    store_one(lid + WG * {f}u, v{f}, true);", "    store_one(lid + WG * {f}u, v{f}, true, par);"),
    (
        "          let kt = subgroupMatrixLoad<RF, col_major>(&kf[n * DK + {c}u], 0u, KP4);",
        "          let kt = subgroupMatrixLoad<RF, col_major>(&kf[par * KPF + n * DK + {c}u], 0u, KP4);",
    ),
    ("      kf[at.x][at.y] = vec4<f16>(p);", "      kf[par * KPF + at.x][at.y] = vec4<f16>(p);"),
    (
        "        let p{rr} = subgroupMatrixLoad<LF, row_major>(&kf[(fb + {rr}u) * PB + {kk}u], 0u, KP4);",
        "        let p{rr} = subgroupMatrixLoad<LF, row_major>(&kf[par * KPF + (fb + {rr}u) * PB + {kk}u], 0u, KP4);",
    ),
    (
        "          let vt = subgroupMatrixLoad<RF, row_major>(&vf[{kk}u * DN + part * DNS + {cl}u], 0u, NP4);",
        "          let vt = subgroupMatrixLoad<RF, row_major>(&vf[par * PB * DN + {kk}u * DN + part * DNS + {cl}u], 0u, NP4);",
    ),
    (
        "    workgroupBarrier();  // P, V and S are no longer read\n  }\n",
        "  }\n  workgroupBarrier();  // P and V are no longer read\n",
    ),
]
# S25: the registered kernel on the H100's other fragment shapes, 16x8x16 and 16x8x8 (the GEMM's
# 128 x 128 tile ran 8% and 16% faster on them than on 16x16x16). A plan takes the adapter's first
# f16 -> f32 configuration, so device_s25.sh has these two ids take theirs on the lent machine.
# At D = 64 they need 23,056 and 25,616 bytes (the registered 19,856); D = 128's tile does not fit.
SETS["s25"] = {f"{BASE}_c16816": (BASE, None, None), f"{BASE}_c1688": (BASE, None, None)}
# S26: varlen_bwd.smx's tiles under the step. Its registered tiles take 47,104 bytes and 135-255
# registers a lane at 256 invocations (one workgroup an SM); with two subgroups a row block (each
# keeps one role's fragments: fewer registers) on 4 row blocks and one tile buffer, 23,552 bytes
# at D = 64 (29,952 at D = 128); on 2 row blocks, 128 invocations, 14,976 and 21,376.
BWD = "varlen_bwd.smx"
BWD_LAST = [{"RB": 2, "BT": "SGM_M"}, {"RB": 1, "BT": "SGM_M"}]
SETS["s26"] = {
    f"{BWD}_r4d2n1": (BWD, [{"RB": 4, "BT": "SGM_M", "DS": 2, "NB": 1}, *BWD_LAST], None),
    f"{BWD}_r2d2n1": (BWD, [{"RB": 2, "BT": "SGM_M", "DS": 2, "NB": 1}, *BWD_LAST], None),
}
# S24: where the step is: the registered kernel (19,856 bytes at D = 64) with 4, 8 and 10 KiB more.
SETS["s24"] = {f"{BASE}_pad{kib}": (BASE, None, None, _pad(kib * 256)) for kib in (4, 8, 10)}
SETS["s23"] = {
    f"{BASE}_pad26": (BASE, None, None, _pad(26 * 256)),
    f"{BASE}_pad12": (BASE, None, None, _pad(12 * 256)),
    f"{BASE}_db": (BASE, [{"RB": 8, "BC": 16}, *LAST], None, DOUBLE),
}
CANDIDATES = SETS["s4"]
RANK0 = 51  # below flash_fwd.smx (60), above flash_fwd.blocked_f16 (50)
MARK = "lab/coopmat_ceiling/fwd_candidates.py"  # in each entry's summary: what revert removes
TPR_CONSTRAINT = "max(0, 1 - TPR)"  # a softmax row needs an invocation (TPR_ALL can reach 0)


def candidates(manifest: Dict, which: str) -> Dict[str, Dict]:
    """{id: manifest entry} of every candidate of set `which` (flash_fwd.smx as registered is not one)."""
    out: Dict[str, Dict] = {}
    for i, (kid, (template, tiles, tpr, *edits)) in enumerate(SETS[which].items()):
        e = copy.deepcopy(manifest["kernels"][template if template in manifest["kernels"] else BASE])
        e["template"] = kid if edits else template  # an edited copy: shaders/<kid>.wgsl (apply writes it)
        if tiles is not None:
            e["tiles"] = copy.deepcopy(tiles)
        if tpr:
            e["overrides"]["TPR"] = tpr
            e["constraints"] = [*e["constraints"], TPR_CONSTRAINT]
        e["rank"] = RANK0 + i
        e["summary"] = f"A candidate of {template} ({MARK}): {kid}."
        out[kid] = e
    return out


def apply(which: str) -> None:
    manifest = json.loads(MANIFEST.read_text())
    made = candidates(manifest, which)
    clash = sorted(set(made) & set(manifest["kernels"]))
    if clash:
        raise SystemExit(f"fwd_candidates: {clash} are registered already: revert first")
    # Every edit checked before anything is written: an edit that no longer matches (the kernel
    # has changed since, e.g. took the candidate's change) stops `apply` with the tree untouched.
    copies: Dict[str, str] = {}
    for kid, (template, _, _, *edits) in SETS[which].items():
        if edits:
            text = (SHADERS / f"{template}.wgsl").read_text()
            for old, new in edits[0]:
                if text.count(old) != 1:
                    raise SystemExit(f"fwd_candidates: {old!r} is not in {template}.wgsl exactly once")
                text = text.replace(old, new)
            copies[kid] = text
    for kid, text in copies.items():
        (SHADERS / f"{kid}.wgsl").write_text(text)
    manifest["kernels"].update(made)
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"fwd_candidates: registered {', '.join(made)}")


def revert() -> None:
    manifest = json.loads(MANIFEST.read_text())
    mine = [k for k, e in manifest["kernels"].items() if MARK in str(e.get("summary", ""))]
    for k in mine:
        del manifest["kernels"][k]
        (SHADERS / f"{k}.wgsl").unlink(missing_ok=True)  # an edited copy, where apply wrote one
    MANIFEST.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"fwd_candidates: removed {', '.join(mine) or 'nothing'}")


def kernels(which: str) -> List[str]:
    made = candidates(json.loads(MANIFEST.read_text()), which)
    return [*dict.fromkeys(template for template, *_ in SETS[which].values()), *made]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("verb", choices=["apply", "revert", "kernels"])
    ap.add_argument("--set", default="s4", choices=sorted(SETS), help="the device run's candidates (default s4)")
    args = ap.parse_args(argv)
    if args.verb == "apply":
        apply(args.set)
    elif args.verb == "revert":
        revert()
    else:
        print(",".join(kernels(args.set)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
