"""The `paged_decode` interface: decode attention over a paged KV cache (wgattn.reference.decode_attention),
split across workgroups and merged by log-sum-exp (shaders/interfaces/paged_decode.wgsl).

    q:        [B, Sq_new, Hq, D] float32        k_cache, v_cache: [num_blocks, block_size, Hkv, D]
    block_table: int32 [B, max_blocks]          seq_lens: int32 [B] (the new tokens included)
    alibi_slopes, sinks: [Hq] float32, optional
    outputs:  out [B, Sq_new, Hq, D], lse [B, Sq_new, Hq] (natural log, the sink included)

Options: scale (None: 1/sqrt(D)), window_left (-1 unbounded), softcap (0 off): exactly the
reference's keywords; and num_splits (None: `split_count`'s choice), which forces the split count.

The tile shape and the split count depend on the adapter, and the Params on them (how many row
blocks a kv head's rows are cut into, how many splits), so this interface lays a case out per
target (`layout_on`): `tiles` picks, of the manifest's candidates, the shape that fits with the
fewest row blocks; `split_count` keeps the adapter busy without splits too short to pay for
themselves.

A decode case is a `DecodeConfig`: the live checks draw it on the host, the benchmark (the op
"decode", timed as bandwidth: wgattn.bandwidth) with its cache left for the GPU to fill
(`bench_case`), checked on a part of its output before it is timed (`check_filled`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import reference as _reference
from .. import registry, wgsl
from ..errors import DoesNotFit
from ..expr import evaluate
from ..plan import Buffer
from ..registry import Kernel
from ..target import Target
from . import _paged
from ._paged import INPUTS, MAX_SEQ_LEN, PagedConfig, cache_dtype, paged_cache
from .base import Case, FilledCheck, Layout, Option
from .config import knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = [
    "INTERFACE",
    "Decode",
    "DecodeConfig",
    "tiles",
    "split_count",
    "bytes_touched",
    "cache_dtype",
    "paged_cache",
    "MAX_SPLITS",
    "MAX_SEQ_LEN",
    "MAX_NEW_TOKENS",
]

# The split count: enough workgroups to keep the adapter busy (an H100 has 132 SMs, several
# workgroups each; a software adapter a handful of threads), but each split at least
# MIN_SPLIT_KEYS keys, so that its fixed costs (q staging, a partial state written and merged)
# stay small against the keys it reads. On a GPU a split is cut shorter than LONG_SPLIT_KEYS only
# as far as half of TARGET_WORKGROUPS needs: on the H100 longer splits read faster wherever half
# the workgroups were already there (a 128k-token sequence, the 32k target, GQA 8:1 at 16k; the
# history holds the figures).
TARGET_WORKGROUPS = {"gpu": 1024, "cpu": 32}
MIN_SPLIT_KEYS = 256
LONG_SPLIT_KEYS = {"gpu": 2048, "cpu": MIN_SPLIT_KEYS}
MAX_SPLITS = 256
# Sq_new, the new tokens a sequence of one decoding step: 1 for plain decoding, a few for
# speculative decoding (a draft's tokens verified at once). Each row of a kv head is held in the
# registers of every lane of its row block, and each row block reads the split again: the paged_prefill
# interface takes more (Q tiles on the GPU's matrix units).
MAX_NEW_TOKENS = 16


def _rows_per_block(rows: int, row_blocks: int, cap: int) -> int:
    """ceil(rows / row_blocks) rounded up to 1, 2, 4 or a multiple of 8, at most `cap`: the rows
    of a step (G * Sq_new, Sq_new varying under speculative decoding) then share a few pipelines;
    spare rows are masked and read no more of the cache."""
    rb = -(-max(rows, 1) // row_blocks)
    rb = 1 << (rb - 1).bit_length() if rb <= 8 else -(-rb // 8) * 8
    return min(rb, cap)


def tiles(kernel: Kernel, head_dim: int, rows: int, target: Target, block_size: int = 16) -> Tuple[Dict[str, int], int]:
    """(override constants, row blocks) for `rows` query rows of a kv head (G * Sq_new): of the
    kernel's tile candidates for the adapter's kind (the manifest's `tiles`: WG and KPG, the other
    knobs following from them and head_dim), each with the most rows a block (RB) that passes the
    registry's checks on `target` (the WGSL's caps, the manifest's constraints, workgroup storage,
    invocations), the one with the fewest row blocks (each row block reads the cache again), the
    earlier candidate on a tie. DoesNotFit lists what was tried. (`block_size` picks the kernel's
    variant for powers of two or not; the tile does not depend on it.)"""
    sizes = {"head_dim": head_dim, "block_size": block_size}
    src = kernel.source(sizes)
    cap = wgsl.consts(src)["MAX_RB"]
    kind = "cpu" if target.software else "gpu"
    steps = [r for r in range(cap, 0, -1) if r in (1, 2, 4) or r % 8 == 0]  # the values RB takes
    tried: List[str] = []
    best: Optional[Tuple[Dict[str, int], int]] = None
    for tile in kernel.tiles:
        if tile.get("adapter", kind) != kind:
            continue
        shape = {k: evaluate(v, sizes) if isinstance(v, str) else int(v) for k, v in tile.items() if k != "adapter"}
        for r in steps:
            row_blocks = -(-max(rows, 1) // r)
            try:
                fit = kernel.fit(sizes, target, source=src, chosen={**shape, "RB": _rows_per_block(rows, row_blocks, cap)})
            except DoesNotFit:
                continue
            if best is None or row_blocks < best[1]:
                best = (fit.knobs, row_blocks)
            break
        else:
            tried.append(" ".join(f"{k}={v}" for k, v in shape.items()))
    if best is None:
        raise DoesNotFit(
            f"{kernel.id}: no tile shape fits an adapter with {target.limit('max-compute-workgroup-storage-size')} bytes of "
            f"workgroup storage and {target.limit('max-compute-invocations-per-workgroup')} invocations at head_dim "
            f"{head_dim}, even one row a block (tried {'; '.join(tried) or 'none'})"
        )
    return best


def split_count(longest: int, work_items: int, target: Target) -> int:
    """Splits per (sequence, kv head, row block): ceil(TARGET_WORKGROUPS / work_items) for the
    adapter's kind, at most one per LONG_SPLIT_KEYS keys of the longest span unless fewer leave
    less than half of TARGET_WORKGROUPS, never one per fewer than MIN_SPLIT_KEYS; within
    [1, MAX_SPLITS]. `work_items` = B * Hkv * row blocks, the workgroups one split makes."""
    kind = "cpu" if target.software else "gpu"
    items = max(work_items, 1)
    want = -(-TARGET_WORKGROUPS[kind] // items)
    long_enough = max(longest // LONG_SPLIT_KEYS[kind], -(-TARGET_WORKGROUPS[kind] // (2 * items)))
    return max(1, min(want, long_enough, longest // MIN_SPLIT_KEYS, MAX_SPLITS))


def bytes_touched(seq_lens, window_left: int, new_tokens: int, heads_kv: int, head_dim: int, cache_itemsize: int) -> int:
    """Bytes of K and V a decode step must read at least: each visible key of each kv head once
    (the benchmark's measure of effective bandwidth)."""
    return 2 * sum(_paged.spans(seq_lens, window_left, new_tokens)) * heads_kv * head_dim * cache_itemsize


def _new_tokens(sq: int) -> None:
    if sq > MAX_NEW_TOKENS:
        raise ValueError(
            f"paged_decode takes at most {MAX_NEW_TOKENS} new tokens a sequence (Sq_new = q.shape[1] = {sq}); "
            "the paged_prefill interface takes any number"
        )


def _num_splits(value: Any) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 1 <= int(value) <= MAX_SPLITS:
        raise ValueError(f"num_splits must be None or an integer in [1, {MAX_SPLITS}], got {value!r}")
    return int(value)


@dataclass
class DecodeConfig(PagedConfig):
    """A decode step (wgattn.interfaces._paged.PagedConfig): at most MAX_NEW_TOKENS new tokens a
    sequence."""

    new_tokens: int = knob(1, 1, MAX_NEW_TOKENS, hint="speculative decoding verifies several at once")


def _grid_row(name, lens, sq, hq, hkv, d, bs, options=None, alibi=False, sinks=False, num_splits=None):
    return dict(
        name=name,
        lens=lens,
        sq=sq,
        hq=hq,
        hkv=hkv,
        d=d,
        bs=bs,
        options=options or {},
        alibi=alibi,
        sinks=sinks,
        num_splits=num_splits,
    )


class Decode(_paged.PagedInterface):
    name = "paged_decode"
    OUTPUTS = ("out", "lse")
    Config = DecodeConfig
    bench_op = "decode"

    def checked(self, case: Case) -> _reference.DecodeArgs:
        """The case's arguments through the reference's one check, then the new tokens this
        interface carries."""
        a = super().checked(case)
        _new_tokens(a.q.shape[1])
        return a

    def layout_on(self, kernel: Kernel, case: Case, target: Target) -> Layout:
        """The case laid out for `kernel` on `target`: the tile shape that fits it, the split
        count, and the cache as the kernel reads it (float16 for the F16 variant: a case judged
        for it holds float16-representable values, conformance.judged_case)."""
        a = self.checked(case)
        forced = _num_splits(case.options.get("num_splits"))
        bsz, sq, hq, d = a.q.shape
        num_blocks, block_size, hkv, _ = a.k_cache.shape
        max_blocks = a.block_table.shape[1]
        # a user's WGSL on this interface gets the shape chosen for the first registered kernel
        shaped = registry.load().kernels.get(kernel.id) or self.kernels()[0]
        knobs, row_blocks = tiles(shaped, d, sq * (hq // hkv), target, block_size)
        longest = max(_paged.spans(a.seq_lens, a.window_left, sq) + [0])
        ns = forced or split_count(longest, bsz * hkv * row_blocks, target)
        rows = bsz * sq * hq
        _paged.check_indices(
            a,
            "paged_decode",
            {
                "the partial states (B * Sq_new * Hq * num_splits * ceil(D / 4) * 4)": rows * ns * knobs["D4"] * 4,
                "the workgroups (B * Hkv * num_splits * row blocks)": bsz * hkv * ns * row_blocks,
            },
        )
        values: Dict[str, float] = {
            "batch_size": bsz,
            "new_tokens": sq,
            "heads_q": hq,
            "heads_kv": hkv,
            "head_dim": d,
            "num_blocks": num_blocks,
            "max_blocks": max_blocks,
            "window_left": a.window_left,
            "softcap": a.softcap,
            "scale": a.scale,
            "sinks_on": int(a.sinks is not None),
            "num_splits": ns,
            "row_blocks": row_blocks,
            # A Params field, not a pipeline constant: one pipeline serves every block size (a
            # power of two shifts by block_shift; the kernel's POW2_BLOCKS variant).
            "block_size": block_size,
            "block_shift": block_size.bit_length() - 1 if block_size & (block_size - 1) == 0 else 0,
        }
        slopes, sinks = _paged.head_params(a)
        buffers = _paged.buffers(kernel, a, {"alibi_slopes": slopes, "sinks": sinks})
        buffers["part_o"] = Buffer("part_o", 16 * rows * ns * knobs["D4"], "storage")
        buffers["part_ml"] = Buffer("part_ml", 8 * rows * ns, "storage")
        out_buffers, outputs = _paged.outputs(a)
        buffers.update(out_buffers)
        chosen = {"WG": knobs["WG"], "KPG": knobs["KPG"], "BC": knobs["BC"], "RB": knobs["RB"]}
        config = {**chosen, "row_blocks": row_blocks, "num_splits": ns}
        return Layout(values, buffers, outputs, knobs=knobs, config=config)

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.decode_attention on the case. dtype float32: the naive float32 run;
        float16: the yardstick of the float16-cache kernel, which stores the cache (and the case
        judged for it, conformance.judged_case: every float input) in half precision but computes
        in float32: the naive float32 run on those inputs."""
        dt = np.float32 if np.dtype(dtype) == np.float16 else dtype
        a = self.checked(case)
        i = case.inputs
        out, lse = _reference.decode_attention(
            *(i[n] for n in INPUTS),
            scale=a.scale,
            window_left=a.window_left,
            softcap=a.softcap,
            alibi_slopes=i.get("alibi_slopes"),
            sinks=i.get("sinks"),
            dtype=dt,
        )
        return {"out": out, "lse": lse}

    def case_from_reference(
        self,
        q,
        k_cache,
        v_cache,
        block_table,
        seq_lens,
        *,
        scale=None,
        window_left=-1,
        softcap=0.0,
        alibi_slopes=None,
        sinks=None,
        num_splits=None,
        name: str = "call",
    ) -> Case:
        """A case from decode_attention's arguments (ValueError naming a bad one); `num_splits`
        forces the split count."""
        a = _reference.check_decode_args(
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
        _new_tokens(a.q.shape[1])
        inputs = {
            "q": np.asarray(q),
            "k_cache": np.asarray(k_cache),
            "v_cache": np.asarray(v_cache),
            "block_table": np.asarray(block_table).astype(np.int32),
            "seq_lens": np.asarray(seq_lens).astype(np.int32),
        }
        if alibi_slopes is not None:
            inputs["alibi_slopes"] = np.asarray(alibi_slopes, dtype=np.float32)
        if sinks is not None:
            inputs["sinks"] = np.asarray(sinks, dtype=np.float32)
        options: Dict[str, Option] = {
            "scale": a.scale,
            "window_left": a.window_left,
            "softcap": a.softcap,
            "num_splits": _num_splits(num_splits),
        }
        return Case(name, inputs, options)

    # Block sizes 1, 16, 64 and 24 (not a power of two: the kernel's division variant); lengths
    # ending mid-block; idle slots; GQA 8:1, 2:1 and MQA (32:1); 1, 2, 3 and 5 new tokens; sinks,
    # ALiBi, windows (0 included), softcap, a small scale; head dims 16, 32, 59 (scalar loads), 64,
    # 128, 256, 512; several row blocks a kv head; forced split counts, more splits than tiles
    # (empty splits), one split of many tiles; 16k, 12k and 9k-token caches and a 66k one (the
    # long-context row: few heads, D = 16, affordable on a software adapter). Rows appended last
    # keep the draws of the ones before.
    GRID = [
        _grid_row("gqa8-one-new-bs16-mid-block-idle", [37, 0, 100, 16], 1, 16, 2, 64, 16),
        _grid_row("gqa8-five-new-bs64-sinks", [130, 5, 0, 64], 5, 16, 2, 128, 64, sinks=True),
        _grid_row("mqa32-five-new-row-blocks-alibi", [77, 300], 5, 32, 1, 64, 16, alibi=True, num_splits=3),
        _grid_row("mqa-window-softcap-d59", [200, 9], 3, 6, 1, 59, 16, {"window_left": 31, "softcap": 10.0, "scale": 0.2}),
        _grid_row(
            "everything-d128",
            [500, 0, 77],
            5,
            16,
            2,
            128,
            64,
            {"window_left": 100, "softcap": 20.0},
            alibi=True,
            sinks=True,
            num_splits=4,
        ),
        _grid_row("gqa8-one-new-bs16-d59-sinks", [61, 16, 0], 1, 8, 1, 59, 16, sinks=True, num_splits=2),
        _grid_row("more-splits-than-tiles", [40, 3], 2, 4, 2, 64, 16, alibi=True, num_splits=7),
        _grid_row("one-split-2000-keys", [2000, 1], 1, 4, 1, 64, 64, {"softcap": 30.0, "scale": 0.05}, num_splits=1),
        _grid_row("window0-block1", [50, 2], 2, 4, 4, 32, 1, {"window_left": 0}, num_splits=3),
        _grid_row("d256-gqa2-bs16", [100, 33], 1, 4, 2, 256, 16, sinks=True),
        _grid_row("long-16k-gqa4", [16421], 1, 8, 2, 128, 64),
        _grid_row("long-12k-gqa8-five-new-sinks-alibi", [12007], 5, 8, 1, 64, 16, alibi=True, sinks=True),
        _grid_row("long-9k-window-mqa", [9000, 4096], 5, 8, 1, 64, 64, {"window_left": 1500, "softcap": 25.0}),
        _grid_row("d512-gqa2-two-new-sinks", [300, 41, 0], 2, 4, 2, 512, 16, sinks=True),
        _grid_row("long-66k-mqa-d16-alibi", [66000, 1500], 3, 4, 1, 16, 64, alibi=True),
        _grid_row("block-size-24-gqa2-alibi", [77, 30, 0], 3, 4, 2, 64, 24, {"window_left": 40}, alibi=True, num_splits=2),
    ]

    def grid_case(self, rng, name, lens, sq, hq, hkv, d, bs, options, alibi, sinks, num_splits) -> Case:
        q, k_cache, v_cache, table, seq_lens = paged_cache(rng, lens, sq, hq, hkv, d, bs)
        kw = dict(options)
        if alibi:
            kw["alibi_slopes"] = (2.0 ** -np.linspace(1, 8, hq)).astype(np.float32)  # ALiBi's geometric slopes
        if sinks:
            kw["sinks"] = (rng.standard_normal(hq) * 2).astype(np.float32)
        return self.case_from_reference(q, k_cache, v_cache, table, seq_lens, num_splits=num_splits, name=name, **kw)

    # --- The benchmark: decode timed as bandwidth (wgattn.bandwidth) -------------------------

    def bench_shape(self, config: DecodeConfig) -> List[int]:
        return [config.batch, config.heads, config.seq_len, config.head_dim]

    def bench_bytes(self, kernel: Kernel, case: Case) -> int:
        """Each visible key of each kv head read once, in the cache's precision for `kernel`."""
        a = self.checked(case)
        _, sq, _, d = a.q.shape
        hkv = a.k_cache.shape[2]
        return bytes_touched(a.seq_lens, a.window_left, sq, hkv, d, np.dtype(cache_dtype(kernel)).itemsize)

    def check_filled(self, case: Case, outputs: Mapping[str, np.ndarray], kernel: Optional[Kernel] = None) -> FilledCheck:
        """`out` of a case whose cache the GPU filled against the float64 reference
        (wgattn.interfaces._paged.check_filled: every new token of the pairs it allows), the
        naive float32 run the yardstick of either kernel (both compute in f32)."""
        return _paged.check_filled(case, outputs, self.checked(case))

    def picture_heads(self, case: Case, head: int, heads: int) -> List[int]:
        """Every query head: a head has a row per (sequence, new token), a few; the picture
        shows them all, grouped by head."""
        return list(range(heads))


INTERFACE = Decode()
