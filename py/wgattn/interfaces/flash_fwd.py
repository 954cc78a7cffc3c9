"""The `flash_fwd` interface: packed variable-length attention forward with LSE carrying every knob
of wgattn's contract (the forward that `varlen_bwd` differentiates), over separate token-major f32
buffers plus 64 bytes of params (shaders/interfaces/flash_fwd.wgsl).

    q:            [total_q, Hq, D] float32        k, v: [total_k, Hkv, D] (Hq % Hkv == 0)
    cu_seqlens_q, cu_seqlens_k: int32 [batch + 1] prefix sums (empty sequences allowed)
    alibi_slopes, sinks: [Hq] float32, optional; bound as one buffer alibi_sinks [2, Hq]
    outputs:      out [total_q, Hq, D], lse [total_q, Hq] (natural log, the sink included; -inf,
                  or the sink, on rows with no key)

Options: causal, window (left, right) (-1 unbounded), softcap (0 off), scale (None: 1/sqrt(D)),
causal_align ("bottom_right" | "top_left"): exactly wgattn.reference.varlen_attention_fwd's
keywords, its alibi_slopes and sinks being inputs. The host folds causal into window_right =
min(right, 0) (right -1 -> 0).
A dense (B, H, S, D) problem is the packed one with cu_seqlens = [0, S, 2S, ...]: `dense_case`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping

import numpy as np

from .. import reference as _reference
from ..plan import Output
from ._varlen import (
    ALIBI_SINK_ROWS,
    CAP_SCALE_ROWS,
    DEFAULT_OPTIONS,
    MASK_ROWS,
    SOFTCAP_ROWS,
    Packed,
    PackedConfig,
    PackedInterface,
    case_options,
    head_inputs,
    head_params,
    keywords,
    packed_inputs,
    params,
    qkv,
    random_packed,
    row,
    seqs_label,
    with_heads,
)
from ._varlen import options as check_options
from .base import Case, Layout, data_buffer, out_buffer
from .sdpa_arena import near_tie_big_scores

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "FlashFwd", "FlashFwdConfig", "naive_f16"]

INPUTS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")
OPTIONAL = ("alibi_slopes", "sinks")


def _arrays(inputs: Mapping[str, np.ndarray]) -> Packed:
    """The inputs checked and converted: float32 tensors, int32 prefix sums, the optional float32
    ALiBi slopes and sinks."""
    for name in INPUTS:
        if inputs.get(name) is None:
            raise ValueError(f"{name} is missing from the case's inputs; flash_fwd takes {list(INPUTS + OPTIONAL)}")
    i = inputs
    return qkv(i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"], 1, i.get("alibi_slopes"), i.get("sinks"))


def naive_f16(case: Case) -> Dict[str, np.ndarray]:
    """A naive float16 attention, PyTorch's math path in half precision: every tensor (scores,
    probabilities, out, lse) is stored as float16, each product accumulated in float32 and
    rounded once (NumPy's float16 matmul), softmax on float16 scores. The yardstick for kernels
    that compute in f16 (the tolerance rule's "naive implementation in the same precision")."""
    p_ = _arrays(case.inputs)
    q, k, v, cu_q, cu_k = p_.q, p_.k, p_.v, p_.cu_q, p_.cu_k
    total_q, hq, d = q.shape
    hkv = k.shape[1]
    o = check_options(case.options, d)
    h16 = np.float16
    out = np.zeros((total_q, hq, d), dtype=h16)
    lse = np.full((total_q, hq), -np.inf, dtype=h16)
    if p_.sinks is not None:  # rows with no key: the sink's term alone
        lse[:] = p_.sinks.astype(h16)
    with np.errstate(all="ignore"):  # -inf on masked scores and empty rows is intended
        for q0, q1, k0, k1, visible in _reference.visible_sequences(cu_q, cu_k, o.causal_align, o.left, o.right):
            dist = _reference.seq_distance(q1 - q0, k1 - k0, o.causal_align).astype(h16)
            for h in range(hq):
                g = h // (hq // hkv)
                s = (q[q0:q1, h].astype(h16) @ k[k0:k1, g].astype(h16).T) * h16(o.scale)
                if o.softcap > 0:
                    s = (h16(o.softcap) * np.tanh(s / h16(o.softcap))).astype(h16)
                if p_.alibi_slopes is not None:
                    s = (s - h16(p_.alibi_slopes[h]) * dist).astype(h16)
                s = np.where(visible, s, h16(-np.inf))
                m = s.max(axis=1, keepdims=True)
                if p_.sinks is not None:
                    m = np.maximum(m, h16(p_.sinks[h]))
                m = np.where(np.isfinite(m), m, h16(0))
                e = np.exp((s - m).astype(h16))
                total = e.sum(axis=1, keepdims=True, dtype=h16)
                if p_.sinks is not None:
                    total = (total + np.exp(h16(p_.sinks[h]) - m)).astype(h16)
                p = np.where(total > 0, e / total, h16(0)).astype(h16)
                out[q0:q1, h] = p @ v[k0:k1, g].astype(h16)
                lse[q0:q1, h] = np.where(total[:, 0] > 0, np.log(total[:, 0]) + m[:, 0], h16(-np.inf)).astype(h16)
    return {"out": out, "lse": lse}


@dataclass
class FlashFwdConfig(PackedConfig):
    """flash_fwd's live configuration: every knob of the packed configuration."""


class FlashFwd(PackedInterface):
    name = "flash_fwd"
    OUTPUTS = ("out", "lse")
    Config = FlashFwdConfig
    bench_op = "fwd"

    def layout(self, case: Case) -> Layout:
        p = _arrays(case.inputs)
        total_q, hq, d = p.q.shape
        values = params(p, case.options)
        values["max_seqlen_q"] = int(np.diff(p.cu_q).max()) if p.cu_q.shape[0] > 1 else 0
        data = {"q": p.q, "k": p.k, "v": p.v, "cu_seqlens_q": p.cu_q, "cu_seqlens_k": p.cu_k, "alibi_sinks": head_params(p)}
        buffers = {name: data_buffer(name, arr) for name, arr in data.items()}
        buffers["out"] = out_buffer("out", 4 * total_q * hq * d)
        buffers["lse"] = out_buffer("lse", 4 * total_q * hq)
        return Layout(values, buffers, [Output("out", "out", 0, (total_q, hq, d)), Output("lse", "lse", 0, (total_q, hq))])

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.varlen_attention_fwd on the case (dtype float32: the naive float32 run;
        float16: the naive float16 run, `naive_f16`)."""
        if np.dtype(dtype) == np.float16:
            return naive_f16(case)
        i = case.inputs
        out, lse = _reference.varlen_attention_fwd(
            i["q"],
            i["k"],
            i["v"],
            i["cu_seqlens_q"],
            i["cu_seqlens_k"],
            alibi_slopes=i.get("alibi_slopes"),
            sinks=i.get("sinks"),
            dtype=dtype,
            **keywords(case),
        )
        return {"out": out, "lse": lse}

    def case_from_reference(
        self,
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        *,
        alibi_slopes: Any = None,
        sinks: Any = None,
        name: str = "call",
        **keywords: Any,
    ) -> Case:
        """A case from varlen_attention_fwd's arguments (ValueError naming a bad one)."""
        p = qkv(q, k, v, cu_seqlens_q, cu_seqlens_k, 1, alibi_slopes, sinks)
        opts = case_options(p.q.shape[2], keywords)
        return Case(name, packed_inputs(p), opts)

    def dense_case(self, q, k, v, *, causal=False, scale=None, alibi_slopes=None, sinks=None, name="dense") -> Case:
        """(B, H, S, D) tensors (PyTorch SDPA's layout) as a packed case: the benchmark's shapes.
        Causal is top-left, as PyTorch's is_causal (the same as bottom-right when Sq == Sk)."""
        arrays = [np.asarray(t) for t in (q, k, v)]
        for nm, t in zip("qkv", arrays):
            if t.ndim != 4:
                raise ValueError(f"{nm} must be 4-D [B, H, S, D], got shape {t.shape}")
        bq, hq, sq, d = arrays[0].shape
        bk, hkv, sk, dk = arrays[1].shape
        if bk != bq:
            raise ValueError(f"k's batch ({bk}) must equal q's ({bq})")
        pq, pk, pv = [np.ascontiguousarray(t.transpose(0, 2, 1, 3).reshape(-1, t.shape[1], t.shape[3])) for t in arrays]
        cu_q = np.arange(bq + 1, dtype=np.int32) * sq
        cu_k = np.arange(bq + 1, dtype=np.int32) * sk
        return self.case_from_reference(
            pq,
            pk,
            pv,
            cu_q,
            cu_k,
            causal=causal,
            scale=scale,
            causal_align="top_left",
            alibi_slopes=alibi_slopes,
            sinks=sinks,
            name=name,
        )

    # Head dims 1, 8, 59, 64, 111, 128, 130 and 256 (the tiled kernel's largest); GQA 1, 2, 3 and
    # all-to-one; empty sequences; unequal lengths both ways; causal in both alignments
    # (bottom-right with len_q > len_k leaves rows with no key); windows left, right, both, the 0
    # edges; softcap; a negative scale; long rows: 1023 x 1024 causal, 160 x 2048 dense, 300 x 700
    # windowed; large nearly tied scores (sdpa_arena.near_tie_big_scores); head dims past 256: a
    # window in the top-left alignment at 512, causal at 300, 510 (not a multiple of 4). Rows
    # appended last keep the draws of the ones before.
    GRID = [
        row("dense-d1", [(5, 147)], 2, 2, 1),
        *MASK_ROWS,
        *CAP_SCALE_ROWS,
        row("d256-causal-br-gqa2", [(70, 90)], 4, 2, 256, {"causal": True}),
        row("d128-window-long", [(300, 700)], 2, 2, 128, {"window": (200, 50)}),
        row("long-causal-br-d64", [(1023, 1024)], 2, 1, 64, {"causal": True}),
        row("long-dense-d64-gqa3", [(160, 2048)], 3, 1, 64),
        row("many-short-d8", [(n % 13, (7 * n) % 11) for n in range(40)], 2, 1, 8, {"causal": True}),
        *SOFTCAP_ROWS,
        dict(row("near-tie-big-scores-d4-gqa2", [(32, 3), (9, 5)], 4, 2, 4), near_tie=True),
        *ALIBI_SINK_ROWS,
        row(
            "d512-window-both-tl-gqa2", [(100, 150), (0, 9), (64, 64)], 4, 2, 512, {"window": (37, 5), "causal_align": "top_left"}
        ),
        row("d300-causal-tl-mqa-unequal", [(50, 120), (90, 30)], 3, 1, 300, {"causal": True, "causal_align": "top_left"}),
        row("d510-dense-gqa3", [(33, 70)], 3, 1, 510),
    ]

    def grid_case(self, rng, name, seqs, hq, hkv, d, options, amp, alibi=False, sinks=False, near_tie=False) -> Case:
        q, k, v, cu_q, cu_k = random_packed(rng, seqs, hq, hkv, d, amp)
        if near_tie:
            q, k = near_tie_big_scores(q, k, axis_s=0)
        opts = dict(DEFAULT_OPTIONS)
        opts.update(options)
        label = seqs_label(seqs) if len(seqs) <= 6 else f"{len(seqs)}seqs"
        inputs = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, **head_inputs(rng, hq, alibi, sinks)}
        return Case(f"{name}-{label}-h{hq}kv{hkv}", inputs, opts)

    def live_case(self, config: PackedConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        t = tensors
        return self.case_from_reference(
            t["q"],
            t["k"],
            t["v"],
            t["cu_seqlens_q"],
            t["cu_seqlens_k"],
            alibi_slopes=t.get("alibi_slopes"),
            sinks=t.get("sinks"),
            name=name,
            **config.options(),
        )

    def bench_cases(self, dense: Mapping[str, np.ndarray], causal: bool) -> List[Case]:
        """The dense forward, packed."""
        return [self.dense_case(dense["q"], dense["k"], dense["v"], causal=causal)]

    def bench_variant(self, case: Case, variant: str) -> Case:
        """The case with ALiBi slopes, sinks or both (`with_heads`)."""
        return with_heads(case, variant)


INTERFACE = FlashFwd()
