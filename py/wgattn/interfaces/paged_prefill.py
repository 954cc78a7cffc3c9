"""The `paged_prefill` interface: new tokens of each sequence, any number up to its whole cache
(chunked prefill), against a paged KV cache (wgattn.reference.decode_attention, the one definition
decode uses too), in one pass over blocks of new tokens (shaders/interfaces/paged_prefill.wgsl).

    q:        [B, Sq_new, Hq, D] float32        k_cache, v_cache: [num_blocks, block_size, Hkv, D]
    block_table: int32 [B, max_blocks]          seq_lens: int32 [B] (the new tokens included)
    alibi_slopes, sinks: [Hq] float32, optional
    outputs:  out [B, Sq_new, Hq, D], lse [B, Sq_new, Hq] (natural log, the sink included)

Options: scale (None: 1/sqrt(D)), window_left (-1 unbounded), softcap (0 off): exactly the
reference's keywords.

Why an interface of its own rather than paged_decode with more new tokens: an interface is a
binding contract, and decode's (two passes, partial softmax states bound as scratch buffers, the
split count and row blocks in its Params) is made for a handful of rows that read the cache once;
a prefill's thousands of rows are Q tiles on the GPU's matrix units in one pass, which binds none
of that. Both compute the same op, as varlen_fwd and flash_fwd both compute
varlen_attention_fwd: `wgattn.native.decode_attention` runs a paged_decode kernel while the call
has at most 16 new tokens a sequence and a paged_prefill kernel past that (the first kernel by
rank whose interface carries the call). Their benchmarks differ too: decode is timed as the
bandwidth of a cache read beside a copy, prefill as FLOP/s beside flash_fwd on the same work
unpaged (`bench_yardstick`).

A prefill case is a `PrefillConfig`: the live checks draw it on the host, the benchmark (the op
"prefill") with q and the cache left for the GPU to fill (`bench_case`), checked on a part of its
output before it is timed (`check_filled`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import reference as _reference
from .. import registry
from ..bandwidth import device_filled
from ..registry import Kernel
from ..target import Target
from . import _paged, get
from ._paged import INPUTS, MAX_SEQ_LEN, PagedConfig, paged_cache
from .base import MAX_SCORES, Case, FilledCheck, Layout, Option
from .config import knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "Prefill", "PrefillConfig", "naive_f16", "YARDSTICKS"]

# flash_fwd's kernels a prefill is timed beside on the same work unpaged, best first: the first
# the adapter runs (bench_yardstick).
YARDSTICKS = ("flash_fwd.smx", "flash_fwd.blocked_f16", "flash_fwd.blocked")
# New tokens at each end of a sequence whose output is checked on filled inputs (check_filled):
# the float64 reference over all 2048 of a 32k-token cache would take minutes in the page.
CHECK_ROWS = 4


@dataclass
class PrefillConfig(PagedConfig):
    """A chunked prefill (wgattn.interfaces._paged.PagedConfig): `new_tokens` new ones a sequence,
    up to its whole cache. A live check's reference computes batch * heads * new_tokens *
    seq_len scores at most MAX_SCORES; a benchmark's q is left for the GPU to fill with its cache."""

    batch: int = knob(3, 1, 64)
    new_tokens: int = knob(48, 1, MAX_SEQ_LEN, hint="a chunk of a prompt, up to the whole cache (seq_len)")
    seq_len: int = knob(300, 1, MAX_SEQ_LEN, hint="tokens in the cache of the first sequence, the new ones included")

    FILL_Q = True

    def tensors(self, filled: bool = False) -> Dict[str, np.ndarray]:
        scores = self.batch * self.heads * self.new_tokens * self.seq_len
        if not filled and scores > MAX_SCORES:
            raise ValueError(
                f"case too large: batch*heads*new_tokens*seq_len = {scores} scores for the reference; at most {MAX_SCORES}"
            )
        return super().tensors(filled)


def naive_f16(
    q, k_cache, v_cache, block_table, seq_lens, *, scale=None, window_left=-1, softcap=0.0, alibi_slopes=None, sinks=None
) -> Tuple[np.ndarray, np.ndarray]:
    """decode_attention's arguments run naively in float16, PyTorch's math path in half precision
    (as flash_fwd.naive_f16): every tensor (scores, biases, probabilities, out, lse) stored as
    float16, each product of float16 operands accumulated in float32 and rounded once (what
    NumPy's float16 matmul computes, through a float32 matmul: NumPy's own float16 loop takes
    minutes on a benchmark's 32k-key rows in the page). The yardstick of kernels that compute in
    f16 (the tolerance rule's "naive implementation in the same precision")."""
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
    h16 = np.float16
    bsz, sq, hq, d = a.q.shape
    _, bs, hkv, _ = a.k_cache.shape
    out = np.zeros((bsz, sq, hq, d), dtype=h16)
    lse = np.full((bsz, sq, hq), -np.inf, dtype=h16)
    rows = max(1, (1 << 20) // max(1, max(a.seq_lens)))  # new tokens a chunk of scores
    with np.errstate(all="ignore"):  # -inf on masked scores and empty rows is intended
        for b, n in enumerate(a.seq_lens):
            blocks = a.block_table[b, : -(-n // bs)]
            kv: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}  # kv head -> its keys and values, gathered once
            for h in range(hq):
                g = h // (hq // hkv)
                sink = None if a.sinks is None else h16(a.sinks[h])
                if n == 0:
                    if sink is not None:
                        lse[b, :, h] = sink
                    continue
                if g not in kv:  # float16 values, held in float32 for the products (it holds every float16)
                    kv[g] = tuple(
                        c[blocks, :, g].reshape(-1, d)[:n].astype(h16).astype(np.float32) for c in (a.k_cache, a.v_cache)
                    )  # type: ignore[assignment]
                k, v = kv[g]
                keys = np.arange(n)
                for i0 in range(0, sq, rows):
                    pos = np.arange(n - sq + i0, n - sq + min(sq, i0 + rows))
                    visible = keys[None, :] <= pos[:, None]
                    if a.window_left >= 0:
                        visible &= keys[None, :] >= pos[:, None] - a.window_left
                    s = (a.q[b, i0 : i0 + len(pos), h].astype(h16).astype(np.float32) @ k.T).astype(h16) * h16(a.scale)
                    if a.softcap > 0:
                        s = (h16(a.softcap) * np.tanh(s / h16(a.softcap))).astype(h16)
                    if a.alibi_slopes is not None:
                        s = (s + h16(a.alibi_slopes[h]) * (keys[None, :] - pos[:, None]).astype(h16)).astype(h16)
                    s = np.where(visible, s, h16(-np.inf))
                    m = s.max(axis=1, keepdims=True)
                    if sink is not None:
                        m = np.maximum(m, sink)
                    m = np.where(np.isfinite(m), m, h16(0))
                    e = np.exp((s - m).astype(h16))
                    total = e.sum(axis=1, keepdims=True, dtype=h16)
                    if sink is not None:
                        total = (total + np.exp((sink - m).astype(h16))).astype(h16)
                    p = np.where(total > 0, e / total, h16(0)).astype(h16)
                    out[b, i0 : i0 + len(pos), h] = (p.astype(np.float32) @ v).astype(h16)
                    lse[b, i0 : i0 + len(pos), h] = np.where(total[:, 0] > 0, np.log(total[:, 0]) + m[:, 0], -np.inf)
    return out, lse


def _grid_row(name, lens, sq, hq, hkv, d, bs, options=None, alibi=False, sinks=False):
    return dict(name=name, lens=lens, sq=sq, hq=hq, hkv=hkv, d=d, bs=bs, options=options or {}, alibi=alibi, sinks=sinks)


class Prefill(_paged.PagedInterface):
    name = "paged_prefill"
    OUTPUTS = ("out", "lse")
    Config = PrefillConfig
    bench_op = "prefill"

    def layout_on(self, kernel: Kernel, case: Case, target: Target) -> Layout:
        """The case laid out for `kernel` on `target`: the cache as the kernel reads it (float16
        for an F16 variant: a case judged for it holds float16-representable values,
        conformance.judged_case), the registry's tile (the first candidate that fits the
        target) with the block size as the override constant BS (one pipeline per block size:
        j / BS compiles to shifts). DoesNotFit when no tile fits."""
        a = self.checked(case)
        bsz, sq, hq, d = a.q.shape
        num_blocks, block_size, hkv, _ = a.k_cache.shape
        _paged.check_indices(a, "paged_prefill")
        values: Dict[str, float] = {
            "batch_size": bsz,
            "new_tokens": sq,
            "heads_q": hq,
            "heads_kv": hkv,
            "head_dim": d,
            "num_blocks": num_blocks,
            "max_blocks": a.block_table.shape[1],
            "block_size": block_size,
            "window_left": a.window_left,
            "softcap": a.softcap,
            "scale": a.scale,
            "sinks_on": int(a.sinks is not None),
        }
        slopes, sinks = _paged.head_params(a)
        buffers = _paged.buffers(kernel, a, {"head_params": np.stack([slopes, sinks], axis=1)})
        out_buffers, outputs = _paged.outputs(a)
        buffers.update(out_buffers)
        # a user's WGSL on this interface gets the tile of the first registered kernel
        shaped = registry.load().kernels.get(kernel.id) or self.kernels()[0]
        sizes = {k: int(v) for k, v in values.items() if isinstance(v, int)}
        if any(sizes.get(name, 0) > most for name, most in shaped.limits.items()):
            return Layout(values, buffers, outputs, knobs={"BS": block_size})  # the plan says which limit
        fit = shaped.fit(sizes, target, overrides={"BS": block_size})
        return Layout(values, buffers, outputs, knobs=fit.knobs, config=dict(fit.knobs))

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.decode_attention on the case. dtype float32: the naive float32 run;
        float16: the naive float16 run (`naive_f16`), the yardstick of the kernels that compute
        in f16 (on subgroup matrices) or stage the cache in it."""
        a = self.checked(case)
        i = case.inputs
        args = [i[n] for n in INPUTS]
        kw = dict(
            scale=a.scale, window_left=a.window_left, softcap=a.softcap, alibi_slopes=i.get("alibi_slopes"), sinks=i.get("sinks")
        )
        if np.dtype(dtype) == np.float16:
            out, lse = naive_f16(*args, **kw)
        else:
            out, lse = _reference.decode_attention(*args, dtype=dtype, **kw)
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
        name: str = "call",
    ) -> Case:
        """A case from decode_attention's arguments (ValueError naming a bad one)."""
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
        options: Dict[str, Option] = {"scale": a.scale, "window_left": a.window_left, "softcap": a.softcap}
        return Case(name, inputs, options)

    # Sequences whose new tokens fill their whole cache, and others with a long history before
    # them; idle slots; block sizes 1, 4, 7, 16, 32 and 64, lengths ending mid-block; GQA 4:1, 3:1,
    # 2:1, MHA, MQA; 1 new token up to 300; head dims 1, 16, 32, 59 and 111 (scalar loads), 64,
    # 128, 256 and 512; windows (0 included), softcap, a small scale, ALiBi, sinks; blocks of new
    # tokens past a tile's rows and keys past many tiles; a 70k-token cache (the long-context
    # row: few heads, D = 16, affordable on a software adapter). Rows appended last keep the draws
    # of the ones before.
    GRID = [
        _grid_row("whole-cache-gqa4-bs16-idle", [40, 100, 0], 40, 8, 2, 64, 16),
        _grid_row("awkward-d59-mqa-bs7", [131, 57], 57, 6, 1, 59, 7),
        _grid_row("window-softcap-d111-gqa3", [300, 128], 100, 6, 2, 111, 16, {"window_left": 37, "softcap": 15.0, "scale": 0.2}),
        _grid_row("alibi-sinks-mha-bs1-idle", [65, 20, 0], 20, 4, 4, 64, 1, alibi=True, sinks=True),
        _grid_row("one-new-token-bs64-sinks", [500, 1], 1, 8, 1, 128, 64, sinks=True),
        _grid_row(
            "everything-d128-many-tiles",
            [777, 129],
            129,
            8,
            2,
            128,
            16,
            {"window_left": 300, "softcap": 20.0},
            alibi=True,
            sinks=True,
        ),
        _grid_row("d256-gqa2", [90, 200], 90, 4, 2, 256, 16),
        _grid_row("d512-gqa2-bs32-sinks", [70, 33], 33, 2, 1, 512, 32, sinks=True),
        _grid_row("d1-window0-bs4", [30, 12], 12, 2, 1, 1, 4, {"window_left": 0}),
        _grid_row("window-in-new-tokens-d32", [50, 200], 48, 4, 2, 32, 16, {"window_left": 13}),
        _grid_row("long-rows-d64-bs64", [2100], 300, 2, 1, 64, 64),
        _grid_row("many-short-d16-bs4", [3, 0, 17, 5, 9, 3, 30, 0, 4, 11], 3, 4, 2, 16, 4, alibi=True),
        _grid_row("long-70k-d16-bs64-sinks", [70001, 65536], 24, 2, 1, 16, 64, sinks=True),
    ]

    def grid_case(self, rng, name, lens, sq, hq, hkv, d, bs, options, alibi, sinks) -> Case:
        q, k_cache, v_cache, table, seq_lens = paged_cache(rng, lens, sq, hq, hkv, d, bs)
        kw = dict(options)
        if alibi:
            kw["alibi_slopes"] = (2.0 ** -np.linspace(1, 8, hq)).astype(np.float32)  # ALiBi's geometric slopes
        if sinks:
            kw["sinks"] = (rng.standard_normal(hq) * 2).astype(np.float32)
        return self.case_from_reference(q, k_cache, v_cache, table, seq_lens, name=name, **kw)

    # --- The benchmark: FLOP/s on inputs the GPU fills, beside flash_fwd on the same work ------

    def bench_shape(self, config: PrefillConfig) -> List[int]:
        return [config.batch, config.heads, config.new_tokens, config.head_dim]

    def bench_flops(self, case: Case) -> float:
        """FlashAttention's count on the visible (query, key) pairs only: 4 * D * Hq per pair
        (Q·Kᵀ and P·V, a multiply and an add each); the yardstick's is the same work."""
        a = self.checked(case)
        _, sq, hq, d = a.q.shape
        return 4.0 * d * hq * _paged.visible_keys(a.seq_lens, a.window_left, sq)

    def bench_yardstick(self, case: Case, target: Target) -> Tuple[Optional[Kernel], Optional[Case], str]:
        """flash_fwd on the same work unpaged: the new tokens of each sequence as its packed
        queries (cu_seqlens_q, Sq_new each; an idle slot's see no key), its whole cache as its
        packed keys (cu_seqlens_k from seq_lens), causal bottom-right, window (window_left, -1):
        (kernel, case, "") for the first of YARDSTICKS `target` runs, else (None, None, why). Its
        inputs are left for the GPU (it is timed on zeros, unchecked: it owes nothing to a
        benchmark, and its time does not depend on the values but for the lazy rescale, which
        zeros never take and random scores take in a row's first tiles only)."""
        a = self.checked(case)
        bsz, sq, hq, d = a.q.shape
        hkv = a.k_cache.shape[2]
        reg = registry.load()
        kernel = next((reg.kernel(k) for k in YARDSTICKS if k in reg.kernels and not target.lacks(reg.kernel(k))), None)
        if kernel is None:
            return None, None, f"no flash_fwd kernel of {list(YARDSTICKS)} runs on {target.name}"
        total_k = int(sum(a.seq_lens))
        cu_q = (np.arange(bsz + 1) * sq).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(a.seq_lens)]).astype(np.int32)
        kw: Dict[str, object] = dict(causal=True, causal_align="bottom_right", window=(a.window_left, -1), softcap=a.softcap)
        kw["scale"] = a.scale
        if a.alibi_slopes is not None:
            kw["alibi_slopes"] = a.alibi_slopes
        if a.sinks is not None:
            kw["sinks"] = a.sinks
        try:
            flash = get(kernel.interface).case_from_reference(
                device_filled((bsz * sq, hq, d)),
                device_filled((total_k, hkv, d)),
                device_filled((total_k, hkv, d)),
                cu_q,
                cu_k,
                name=f"{case.name}-unpaged",
                **kw,
            )
        except (TypeError, ValueError) as exc:  # a knob flash_fwd does not take
            return None, None, f"{kernel.id} cannot take the same work: {exc}"
        return kernel, flash, ""

    def check_filled(self, case: Case, outputs: Mapping[str, np.ndarray], kernel: Optional[Kernel] = None) -> FilledCheck:
        """`out` of a case whose inputs the GPU filled against the float64 reference
        (wgattn.interfaces._paged.check_filled), on the first and last CHECK_ROWS new tokens of
        the pairs it allows, by the rule of `kernel`'s precision (the naive float16 run for an
        f16 kernel)."""
        naive = naive_f16 if kernel is not None and kernel.precision == "f16" else None
        return _paged.check_filled(case, outputs, self.checked(case), rows=CHECK_ROWS, naive=naive)


INTERFACE = Prefill()
