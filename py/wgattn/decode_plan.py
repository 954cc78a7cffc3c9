"""Plans for the decode kernels (shaders/decode.split.wgsl): decode attention over a paged KV cache,
split across workgroups and merged by log-sum-exp (wgattn.reference.decode_attention).

This module lays a call out for the GPU (Buffers, the two Dispatches, their workgroup counts), chooses
the tile shape for the adapter and the split count for the cache length, and validates what the
kernels need beyond the reference's checks. Any runtime executes the Plan it returns
(wgattn.native.runtime().run(plan)); pure Python and NumPy, so the page can build the same plans.

    q:        [B, Sq_new, Hq, D] float32        k_cache, v_cache: [num_blocks, block_size, Hkv, D]
    block_table: int32 [B, max_blocks]          seq_lens: int32 [B]
    outputs:  out [B, Sq_new, Hq, D], lse [B, Sq_new, Hq] (natural log, the sink included)

Kernels: "decode.split" (f32 cache) and "decode.split_f16" (f16 cache, needs the adapter's
shader-f16; arithmetic in f32). Both are one template; `VEC4` (head_dim % 4 == 0) moves rows as vec4.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from . import reference as _reference
from .plan import Buffer, Dispatch, Output, Plan
from .registry import Pass, shader_dir, target_limits
from .wgsl import preprocess, reader

__all__ = [
    "KERNELS",
    "PARAMS",
    "Tiles",
    "tiles",
    "split_count",
    "plan",
    "kernel_source",
    "pack_params",
    "bytes_touched",
    "MAX_HEAD_DIM",
    "MAX_SPLITS",
    "MIN_SPLIT_KEYS",
    "TARGET_WORKGROUPS",
]

TEMPLATE = "decode.split"
# kernel id -> (defines, adapter features it needs)
KERNELS: Dict[str, Tuple[Dict[str, int], Tuple[str, ...]]] = {
    "decode.split": ({"F16": 0}, ()),
    "decode.split_f16": ({"F16": 1}, ("shader-f16",)),
}
# The uniform Params struct in WGSL order (tests/test_native_decode.py holds it to the WGSL).
PARAMS: Tuple[Tuple[str, str], ...] = (
    ("batch_size", "u32"),
    ("new_tokens", "u32"),
    ("heads_q", "u32"),
    ("heads_kv", "u32"),
    ("head_dim", "u32"),
    ("num_blocks", "u32"),
    ("max_blocks", "u32"),
    ("window_left", "i32"),
    ("softcap", "f32"),
    ("scale", "f32"),
    ("sinks_on", "u32"),
    ("num_splits", "u32"),
    ("row_blocks", "u32"),
    ("_pad0", "u32"),
    ("_pad1", "u32"),
    ("_pad2", "u32"),
)
_FORMAT = {"u32": "I", "i32": "i", "f32": "f"}
# The split pass's bindings, then the combine pass's: (binding, buffer) and the buffer's type.
SPLIT_USES = (0, 1, 2, 3, 4, 5, 7, 8, 11)
COMBINE_USES = (6, 7, 8, 9, 10, 11)
BINDINGS = {
    0: ("q", "read-only-storage"),
    1: ("k_cache", "read-only-storage"),
    2: ("v_cache", "read-only-storage"),
    3: ("block_table", "read-only-storage"),
    4: ("seq_lens", "read-only-storage"),
    5: ("alibi_slopes", "read-only-storage"),
    6: ("sinks", "read-only-storage"),
    7: ("part_o", "storage"),
    8: ("part_ml", "storage"),
    9: ("out", "storage"),
    10: ("lse", "storage"),
    11: ("params", "uniform"),
}

MAX_HEAD_DIM = 256
# Capacities of the WGSL's private arrays (MAX_SPT, MAX_RPT, MAX_CPT, MAX_PF there).
_MAX_SPT, _MAX_RPT, _MAX_CPT, _MAX_PF = 16, 16, 2, 16
# (invocations, keys per tile) candidates, best first. On a CPU adapter invocations are SIMD lanes
# and each barrier synchronises them all: smaller workgroups win there (docs/performance.md).
_CANDIDATES = {"gpu": ((128, 32), (128, 16), (64, 16), (64, 8), (64, 4)), "cpu": ((64, 16), (32, 8), (32, 4))}
# The split count: enough workgroups to keep the adapter busy (an H100 has 132 SMs, several
# workgroups each; a software adapter a handful of threads), but each split at least
# MIN_SPLIT_KEYS keys, so that its fixed costs (q staging, a partial state written and merged)
# stay small against the keys it reads.
TARGET_WORKGROUPS = {"gpu": 1024, "cpu": 32}
MIN_SPLIT_KEYS = 256
MAX_SPLITS = 256
_U32 = 2**32 - 1
_I32 = 2**31 - 1


@dataclass(frozen=True)
class Tiles:
    """The override constants of one shape (the WGSL header says what each is), and how many row
    blocks the G * Sq_new rows of a kv head are cut into."""

    WG: int
    BC: int
    RB: int
    D4: int
    QS: int
    KS: int
    SRG: int
    SPT: int
    NC: int
    NRG: int
    RPT: int
    CPT: int
    PF: int
    row_blocks: int

    def constants(self) -> Dict[str, float]:
        return {k: float(v) for k, v in self.__dict__.items() if k != "row_blocks"}

    def storage(self, f16: bool) -> int:
        """Bytes of workgroup memory: q_tile, k_tile, v_tile, s_tile, m_row, l_row, alpha_row."""
        return 16 * self.RB * self.QS + 2 * self.BC * self.KS * (8 if f16 else 16) + 4 * self.RB * self.BC + 12 * self.RB


def _odd(x: int) -> int:
    return x if x % 2 else x + 1


def _rows_per_block(rows: int, row_blocks: int, cap: int) -> int:
    """ceil(rows / row_blocks) rounded up to 1, 2, 4 or a multiple of 8, at most `cap`: the rows
    of a step (G * Sq_new, Sq_new varying under speculative decoding) then share a few pipelines;
    spare rows are masked and read no more of the cache."""
    rb = -(-max(rows, 1) // row_blocks)
    rb = 1 << (rb - 1).bit_length() if rb <= 8 else -(-rb // 8) * 8
    return min(rb, cap)


def tiles(head_dim: int, rows: int, f16: bool, limits: Optional[Mapping[str, int]] = None) -> Tiles:
    """The tile shape for `rows` query rows of a kv head on an adapter with `limits`
    (wgattn.registry.target_limits() by default): of the (invocations, keys per tile) candidates
    whose private arrays hold the rows and whose workgroup memory fits, the one with the fewest
    row blocks (each row block reads the cache again), the earlier candidate on a tie."""
    lim = dict(target_limits() if limits is None else limits)
    d4 = -(-head_dim // 4)
    tried, best = [], None
    for wg, bc in _CANDIDATES["cpu" if lim.get("cpu") else "gpu"]:
        if wg > lim["max_invocations"]:
            continue
        nc = min(wg, 1 << (d4 - 1).bit_length())
        nrg, cpt, srg = wg // nc, -(-d4 // nc), wg // bc
        pf = -(-bc * d4 // wg)
        if cpt > _MAX_CPT or pf > _MAX_PF:
            continue
        cap = min(_MAX_SPT * srg, (_MAX_RPT // cpt) * nrg)
        row_blocks = -(-max(rows, 1) // cap)
        while True:
            rb = _rows_per_block(rows, row_blocks, cap)
            t = Tiles(
                wg, bc, rb, d4, _odd(d4), _odd(max(d4, nc * cpt)), srg, -(-rb // srg), nc, nrg, -(-rb // nrg), cpt, pf, row_blocks
            )
            if t.storage(f16) <= lim["max_wg_storage"]:
                if best is None or t.row_blocks < best.row_blocks:
                    best = t
                break
            if rb == 1:
                tried.append(f"WG={wg} BC={bc}: {t.storage(f16)} bytes")
                break
            row_blocks += 1
    if best is None:
        raise ValueError(
            f"decode.split: no tile shape fits an adapter with {lim['max_wg_storage']} bytes of workgroup storage and "
            f"{lim['max_invocations']} invocations at head_dim {head_dim} ({'; '.join(tried) or 'none tried'})"
        )
    return best


def _spans(args: _reference.DecodeArgs) -> List[int]:
    """Per sequence, how many keys its new tokens see together (its window from the first one)."""
    sq = args.q.shape[1]
    out = []
    for n in args.seq_lens:
        lo = 0 if (n == 0 or args.window_left < 0) else max(0, n - sq - args.window_left)
        out.append(n - lo)
    return out


def split_count(longest: int, work_items: int, limits: Optional[Mapping[str, int]] = None) -> int:
    """Splits per (sequence, kv head, row block): ceil(TARGET_WORKGROUPS / work_items) for the
    adapter's kind, at most one per MIN_SPLIT_KEYS keys of the longest span, within [1, MAX_SPLITS].
    `work_items` = B * Hkv * row blocks, the workgroups one split makes."""
    lim = dict(target_limits() if limits is None else limits)
    want = -(-TARGET_WORKGROUPS["cpu" if lim.get("cpu") else "gpu"] // max(work_items, 1))
    return max(1, min(want, longest // MIN_SPLIT_KEYS, MAX_SPLITS))


def _f32(a: Any) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32)


def plan(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    block_table: Any,
    seq_lens: Any,
    *,
    scale: Any = None,
    window_left: Any = -1,
    softcap: Any = 0.0,
    alibi_slopes: Any = None,
    sinks: Any = None,
    kernel: Optional[str] = None,
    num_splits: Optional[int] = None,
    limits: Optional[Mapping[str, int]] = None,
    trusted: bool = True,
    source: Optional[str] = None,
) -> Plan:
    """The Plan computing wgattn.reference.decode_attention(...) with the same arguments.

    `kernel`: "decode.split" (the cache uploaded as float32) or "decode.split_f16" (as float16:
    a float16 cache goes up as it is, any other is rounded); default: f16 for a float16 cache.
    `num_splits`: force the split count (1..MAX_SPLITS) instead of `split_count`'s choice.
    `limits`: the adapter the tiles are chosen for (wgattn.registry.target_limits() by default).
    `trusted`: the dispatches may run without runtime bounds checks (the kernel guards its indices).
    `source`: WGSL to run instead of the kernel's own (same bindings and entry points; run checked).
    ValueError names what is wrong: the reference's checks first, then the kernels' own limits."""
    args = _reference.check_decode_args(
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        scale=scale,
        window_left=window_left,
        softcap=softcap,
        alibi_slopes=alibi_slopes,
        sinks=sinks,
    )
    bsz, sq, hq, d = args.q.shape
    num_blocks, block_size, hkv, _ = args.k_cache.shape
    max_blocks = args.block_table.shape[1]
    if kernel is None:
        kernel = "decode.split_f16" if args.k_cache.dtype == np.float16 and args.v_cache.dtype == np.float16 else "decode.split"
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {sorted(KERNELS)}, got {kernel!r}")
    defines, requires = KERNELS[kernel]
    f16 = bool(defines["F16"])
    if d > MAX_HEAD_DIM:
        raise ValueError(f"{kernel} supports head_dim <= {MAX_HEAD_DIM}, got {d}")
    group = hq // hkv
    t = tiles(d, sq * group, f16, limits)
    longest = max(_spans(args) + [0])
    if num_splits is None:
        ns = split_count(longest, bsz * hkv * t.row_blocks, limits)
    elif isinstance(num_splits, (bool, np.bool_)) or not isinstance(num_splits, (int, np.integer)):
        raise ValueError(f"num_splits must be None or an integer in [1, {MAX_SPLITS}], got {num_splits!r}")
    else:
        ns = int(num_splits)
        if not 1 <= ns <= MAX_SPLITS:
            raise ValueError(f"num_splits must be None or an integer in [1, {MAX_SPLITS}], got {ns}")
    rows = bsz * sq * hq
    # Every element index the kernels form fits in u32, every position in i32.
    sizes = {
        "q (B * Sq_new * Hq * D)": rows * d,
        "the cache (num_blocks * block_size * Hkv * D)": num_blocks * block_size * hkv * d,
        "the partial states (B * Sq_new * Hq * num_splits * ceil(D / 4) * 4)": rows * ns * t.D4 * 4,
        "block_table (B * max_blocks)": bsz * max_blocks,
        "the workgroups (B * Hkv * num_splits * row blocks)": bsz * hkv * ns * t.row_blocks,
    }
    for what, size in sizes.items():
        if size > _U32:
            raise ValueError(f"{what} = {size} is too large for {kernel}: element indices must fit in u32")
    if max_blocks * block_size > _I32:
        raise ValueError(f"max_blocks * block_size = {max_blocks * block_size} must fit in i32 (token positions)")

    if source is None:
        source = kernel_source(kernel, d)
    else:
        trusted = False  # WGSL from elsewhere keeps wgpu's runtime checks
    cache_dtype = np.float16 if f16 else np.float32
    zeros = np.zeros(hq, dtype=np.float32)
    values: Dict[str, float] = {
        "batch_size": bsz,
        "new_tokens": sq,
        "heads_q": hq,
        "heads_kv": hkv,
        "head_dim": d,
        "num_blocks": num_blocks,
        "max_blocks": max_blocks,
        "window_left": args.window_left,
        "softcap": args.softcap,
        "scale": args.scale,
        "sinks_on": int(args.sinks is not None),
        "num_splits": ns,
        "row_blocks": t.row_blocks,
    }
    data = {
        "q": _f32(args.q),
        "k_cache": np.ascontiguousarray(args.k_cache, dtype=cache_dtype),
        "v_cache": np.ascontiguousarray(args.v_cache, dtype=cache_dtype),
        "block_table": args.block_table.astype(np.int32),
        "seq_lens": np.array(args.seq_lens, dtype=np.int32),
        "alibi_slopes": zeros if args.alibi_slopes is None else _f32(args.alibi_slopes),
        "sinks": zeros if args.sinks is None else _f32(args.sinks),
    }
    buffers = [Buffer(name, arr.nbytes, "storage", arr.tobytes()) for name, arr in data.items()]
    buffers += [
        Buffer("part_o", 16 * rows * ns * t.D4, "storage"),
        Buffer("part_ml", 8 * rows * ns, "storage"),
        Buffer("out", 4 * rows * d, "storage", read=True),
        Buffer("lse", 4 * rows, "storage", read=True),
        Buffer("params", 4 * len(PARAMS), "uniform", pack_params(values)),
    ]
    passes = (
        ("split", "decode_split", SPLIT_USES, bsz * hkv * ns * t.row_blocks),
        ("combine", "decode_combine", COMBINE_USES, -(-rows // t.NRG)),
    )
    dispatches = [
        Dispatch(
            label=f"{kernel}.{name}",
            source=source,
            entry_point=entry,
            constants={**t.constants(), "BS": float(block_size)},
            bindings={i: BINDINGS[i][0] for i in uses},
            layout=[(i, BINDINGS[i][1]) for i in uses],
            workgroups=Pass(name, entry, uses, {"items": str(count)}).workgroups({}, {}),
            requires=requires,
            trusted=trusted,
        )
        for name, entry, uses, count in passes
    ]
    meta: Dict[str, object] = {"kernel": kernel, "num_splits": ns, "tiles": t, "longest_span": longest}
    return Plan(
        buffers=buffers,
        dispatches=dispatches,
        outputs=[Output("out", "out", 0, (bsz, sq, hq, d)), Output("lse", "lse", 0, (bsz, sq, hq))],
        meta=meta,
    )


def kernel_source(kernel: str, head_dim: int) -> str:
    """The WGSL both runtimes compile for `kernel` at `head_dim`: the template with its includes,
    F16 for the f16 cache, VEC4 where head_dim % 4 == 0 (wgattn.wgsl)."""
    defines, _ = KERNELS[kernel]
    return preprocess(
        (shader_dir() / f"{TEMPLATE}.wgsl").read_text(),
        {**defines, "VEC4": int(head_dim % 4 == 0)},
        reader(shader_dir()),
        f"{TEMPLATE}.wgsl",
    )


def pack_params(values: Mapping[str, float]) -> bytes:
    """The uniform Params bytes in PARAMS order; the `_pad` fields are 0."""
    out = bytearray()
    for name, typ in PARAMS:
        value = values.get(name, 0)
        out += struct.pack("<" + _FORMAT[typ], float(value) if typ == "f32" else int(value))
    return bytes(out)


def bytes_touched(seq_lens, window_left: int, new_tokens: int, heads_kv: int, head_dim: int, cache_itemsize: int) -> int:
    """Bytes of K and V a decode step must read at least: each visible key of each kv head once
    (the benchmark's measure of effective bandwidth)."""
    keys = 0
    for n in seq_lens:
        n = int(n)
        lo = 0 if (n == 0 or window_left < 0) else max(0, n - new_tokens - window_left)
        keys += n - lo
    return 2 * keys * heads_kv * head_dim * cache_itemsize
