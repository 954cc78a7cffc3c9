"""The `varlen_bwd` interface: the backward of packed variable-length attention (FlashAttention-2
formulas), four passes over separate token-major f32 buffers plus 64 bytes of params
(shaders/interfaces/varlen_bwd.wgsl).

    q, out, dout: [total_q, Hq, D] float32        k, v: [total_k, Hkv, D] (Hq % Hkv == 0)
    lse:          [total_q, Hq], the forward's natural-log LSE (the sink included); -inf (or +inf)
                  on rows with no key
    cu_seqlens_q, cu_seqlens_k: int32 [batch + 1] prefix sums (empty sequences allowed)
    alibi_slopes, sinks: [Hq] float32, optional
    outputs:      dq [total_q, Hq, D], dk and dv [total_k, Hkv, D], dsinks [Hq] (0 without sinks)

Options: causal, window (left, right) (-1 unbounded), softcap (0 off), scale (None: 1/sqrt(D)),
causal_align ("bottom_right" | "top_left"), exactly wgattn.reference.varlen_attention_bwd's
keywords, its alibi_slopes and sinks being inputs. The host folds causal into window_right =
min(right, 0) (right -1 -> 0).

Buffers: stats holds [lse; delta; alibi_slopes; sinks] ([2, total_q, Hq] then [2, Hq]: the
kernel's first pass fills delta; the slopes are 0 without ALiBi), so that no pass binds more than
WebGPU's default 8 storage buffers; dkv holds [dk; dv] ([2, total_k, Hkv, D]). The sinks'
gradient is the interface's own last pass (lib/varlen_bwd_dsinks.wgsl, which the header
includes): a reduction of lse and delta over each head's rows, whatever the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Tuple

import numpy as np

from .. import ranges
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
    options,
    packed_inputs,
    params,
    qkv,
    random_packed,
    row,
    seqs_label,
    with_heads,
)
from .base import Case, Layout, Option, data_buffer, out_buffer

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "VarlenBwd", "VarlenBwdConfig", "naive_f16"]

INPUTS = ("q", "k", "v", "out", "dout", "lse", "cu_seqlens_q", "cu_seqlens_k")
OPTIONAL = ("alibi_slopes", "sinks")


def _present(inputs: Mapping[str, np.ndarray]) -> None:
    for name in INPUTS:
        if inputs.get(name) is None:
            raise ValueError(f"{name} is missing from the case's inputs")


def _arrays(inputs: Mapping[str, np.ndarray]) -> Tuple[Packed, np.ndarray, np.ndarray, np.ndarray]:
    """The inputs checked (wgattn.reference's checkers, then the kernels' index limits) and
    converted: float32 tensors, int32 prefix sums, the optional float32 ALiBi slopes and sinks;
    then out, dout and lse."""
    _present(inputs)
    i = inputs
    # dkv holds dk and dv: two [total_k, Hkv, D] tensors in one buffer
    p = qkv(i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"], 2, i.get("alibi_slopes"), i.get("sinks"))
    out, dout, lse = _grads(i, p.q.shape)
    return p, out, dout, lse


def naive_f16(case: Case) -> Dict[str, np.ndarray]:
    """A naive float16 backward, PyTorch's math path in half precision (flash_fwd.naive_f16's
    counterpart): every tensor (scores, P from the given lse, dP, delta, dS, the gradients) is
    stored as float16, each product accumulated in float32 and rounded once (NumPy's float16
    matmul); a group's query heads add their dk and dv in float16. The yardstick for backward
    kernels that compute in f16."""
    p_, out, dout, lse = _arrays(case.inputs)
    q, k, v, cu_q, cu_k = p_.q, p_.k, p_.v, p_.cu_q, p_.cu_k
    total_q, hq, d = q.shape
    total_k, hkv, _ = k.shape
    o = options(case.options, d)
    h16 = np.float16
    dq = np.zeros((total_q, hq, d), dtype=h16)
    dk = np.zeros((total_k, hkv, d), dtype=h16)
    dv = np.zeros((total_k, hkv, d), dtype=h16)
    dsinks = np.zeros(hq, dtype=h16)
    scale = h16(o.scale)
    with np.errstate(all="ignore"):  # -inf on masked scores and empty rows is intended
        if p_.sinks is not None:
            lse16 = lse.astype(h16)
            share = np.where(np.isfinite(lse16), np.exp((p_.sinks.astype(h16)[None, :] - lse16).astype(h16)), h16(0))
            delta = (dout.astype(h16) * out.astype(h16)).sum(axis=2, dtype=h16)
            dsinks = -(share * delta).astype(h16).sum(axis=0, dtype=h16)
        for q0, q1, k0, k1, visible in _reference.visible_sequences(cu_q, cu_k, o.causal_align, o.left, o.right):
            dist = _reference.seq_distance(q1 - q0, k1 - k0, o.causal_align).astype(h16)
            for h in range(hq):
                g = h // (hq // hkv)
                qh, kh, vh = q[q0:q1, h].astype(h16), k[k0:k1, g].astype(h16), v[k0:k1, g].astype(h16)
                go = dout[q0:q1, h].astype(h16)
                s = (qh @ kh.T) * scale
                slope = np.ones_like(s)
                if o.softcap > 0:
                    t = np.tanh(s / h16(o.softcap)).astype(h16)
                    s = (h16(o.softcap) * t).astype(h16)
                    slope = (h16(1) - t * t).astype(h16)
                if p_.alibi_slopes is not None:
                    s = (s - h16(p_.alibi_slopes[h]) * dist).astype(h16)
                row_lse = lse[q0:q1, h].astype(h16)[:, None]
                p = np.where(visible & np.isfinite(row_lse), np.exp((s - row_lse).astype(h16)), h16(0)).astype(h16)
                dp = go @ vh.T
                delta = (go * out[q0:q1, h].astype(h16)).sum(axis=1, keepdims=True, dtype=h16)
                ds = (p * (dp - delta) * slope).astype(h16)
                dq[q0:q1, h] = (ds @ kh) * scale
                dk[k0:k1, g] += (ds.T @ qh) * scale
                dv[k0:k1, g] += p.T @ go
    return {"dq": dq, "dk": dk, "dv": dv, "dsinks": dsinks}


def _grads(i: Mapping[str, np.ndarray], q_shape):
    dout, out, lse = _reference.check_varlen_grad_inputs(i["dout"], i["out"], i["lse"], q_shape)
    return tuple(np.ascontiguousarray(t, dtype=np.float32) for t in (out, dout, lse))


@dataclass
class VarlenBwdConfig(PackedConfig):
    """varlen_bwd's live configuration: the forward's, whose float64 output and lse (rounded to
    float32, what a float32 forward hands over) the backward takes with a drawn dout."""


class VarlenBwd(PackedInterface):
    name = "varlen_bwd"
    OUTPUTS = ("dq", "dk", "dv", "dsinks")
    KEY_OUTPUTS = ("dk", "dv")
    Config = VarlenBwdConfig
    bench_op = "bwd"

    def magnitudes(self, case: Case) -> Dict[str, float]:
        """The inputs', |scale|, and "ds": dS = P (dout . v - dout . out) is at most max ||dout_i||
        (max ||v_j|| + max ||out_i||)."""
        _present(case.inputs)
        i = case.inputs
        ds = ranges.row_norm(i["dout"]) * (ranges.row_norm(i["v"]) + ranges.row_norm(i["out"]))
        return dict(super().magnitudes(case), ds=ds)

    def f32_bounds(self, case: Case) -> List[ranges.Bound]:
        """The scores (by wgattn.ranges.RECOMPUTED: P comes from the given float32 lse), and the
        gradients (wgattn.ranges.gradients), over the longest sequence's keys or a key's rows (a
        group's query heads each)."""
        _present(case.inputs)
        a, o = self.packed(case)
        i = case.inputs
        dout, out, _ = _reference.check_varlen_grad_inputs(i["dout"], i["out"], i["lse"], a.q.shape)
        longest = [int(np.diff(cu).max()) if cu.shape[0] > 1 else 0 for cu in (a.cu_q, a.cu_k)]
        n = max(longest[1], a.group * longest[0])
        recomputed = "P = exp(s - lse) is recomputed from the float32 lse: its rounding would exceed 1"
        return [self.scores_bound(case, ranges.RECOMPUTED, recomputed), ranges.gradients(o.scale, a.q, a.k, a.v, dout, out, n)]

    def layout(self, case: Case) -> Layout:
        p, out, dout, lse = _arrays(case.inputs)
        total_q, hq, d = p.q.shape
        total_k, hkv, _ = p.k.shape
        stats = np.concatenate([lse.ravel(), np.zeros(total_q * hq, dtype=np.float32), head_params(p).ravel()])
        values = params(p, case.options)
        longest = [int(np.diff(cu).max()) for cu in (p.cu_q, p.cu_k) if cu.shape[0] > 1]
        values["max_seqlen"] = max(longest, default=0)
        data = {
            "q": p.q,
            "k": p.k,
            "v": p.v,
            "out": out,
            "dout": dout,
            "cu_seqlens_q": p.cu_q,
            "cu_seqlens_k": p.cu_k,
            "stats": stats,
        }
        buffers = {name: data_buffer(name, arr) for name, arr in data.items()}
        buffers["dq"] = out_buffer("dq", 4 * total_q * hq * d)
        buffers["dkv"] = out_buffer("dkv", 4 * 2 * total_k * hkv * d)
        buffers["dsinks"] = out_buffer("dsinks", 4 * hq)
        outputs = [
            Output("dq", "dq", 0, (total_q, hq, d)),
            Output("dk", "dkv", 0, (total_k, hkv, d)),
            Output("dv", "dkv", total_k * hkv * d, (total_k, hkv, d)),
            Output("dsinks", "dsinks", 0, (hq,)),
        ]
        return Layout(values, buffers, outputs)

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.varlen_attention_bwd on the case (dtype float32: the naive float32 run;
        float16: the naive float16 run, `naive_f16`)."""
        if np.dtype(dtype) == np.float16:
            return naive_f16(case)
        i = case.inputs
        grads = _reference.varlen_attention_bwd(
            i["dout"],
            i["q"],
            i["k"],
            i["v"],
            i["out"],
            i["lse"],
            i["cu_seqlens_q"],
            i["cu_seqlens_k"],
            alibi_slopes=i.get("alibi_slopes"),
            sinks=i.get("sinks"),
            dtype=dtype,
            **keywords(case),
        )
        return dict(zip(self.OUTPUTS, grads))

    def case_from_reference(
        self,
        dout,
        q,
        k,
        v,
        out,
        lse,
        cu_seqlens_q,
        cu_seqlens_k,
        *,
        alibi_slopes: Any = None,
        sinks: Any = None,
        name: str = "call",
        **keywords: Any,
    ) -> Case:
        """A case from varlen_attention_bwd's arguments (ValueError naming a bad one)."""
        inputs = {
            "q": q,
            "k": k,
            "v": v,
            "out": out,
            "dout": dout,
            "lse": lse,
            "cu_seqlens_q": cu_seqlens_q,
            "cu_seqlens_k": cu_seqlens_k,
            "alibi_slopes": alibi_slopes,
            "sinks": sinks,
        }
        p, out32, dout32, lse32 = _arrays(inputs)
        opts = case_options(p.q.shape[2], keywords)
        return Case(name, {**packed_inputs(p), "out": out32, "dout": dout32, "lse": lse32}, opts)

    # Head dims 59, 64, 111, 130 (past the 64-column chunk); GQA 1, 3 and all-to-one; empty
    # sequences (no queries, no keys); unequal lengths both ways; causal in both alignments
    # (bottom-right with len_q > len_k leaves rows with no key); windows left, right, both, and the
    # 0 edges (keys no query sees); softcap; a negative scale; long rows: 1023 x 1024 causal and
    # 160 x 1024 dense at D = 64. Rows appended last keep the draws of the ones before.
    GRID = [
        *MASK_ROWS,
        row("window-left-0-br-d111", [(50, 80), (80, 50)], 3, 3, 111, {"window": (0, -1)}),
        row("window-right-0-tl-d64-gqa3", [(33, 33), (20, 45)], 6, 2, 64, {"window": (-1, 0), "causal_align": "top_left"}),
        *CAP_SCALE_ROWS,
        row("long-causal-br-d64", [(1023, 1024)], 2, 1, 64, {"causal": True}),
        row("long-dense-d64-gqa3", [(160, 1024)], 3, 1, 64),
        *SOFTCAP_ROWS,
        *ALIBI_SINK_ROWS,
    ]

    def grid_case(self, rng, name, seqs, hq, hkv, d, options, amp, alibi=False, sinks=False) -> Case:
        q, k, v, cu_q, cu_k = random_packed(rng, seqs, hq, hkv, d, amp)
        dout = rng.standard_normal(q.shape).astype(np.float32)
        opts = dict(DEFAULT_OPTIONS)
        opts.update(options)
        heads = head_inputs(rng, hq, alibi, sinks)
        out, lse = self.forward(q, k, v, cu_q, cu_k, opts, heads)
        inputs = {"q": q, "k": k, "v": v, "out": out, "dout": dout, "lse": lse, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
        label = seqs_label(seqs) if len(seqs) <= 6 else f"{len(seqs)}seqs"
        return Case(f"{name}-{label}-h{hq}kv{hkv}", {**inputs, **heads}, opts)

    @staticmethod
    def forward(q, k, v, cu_q, cu_k, options: Mapping[str, Option], heads: Mapping[str, np.ndarray]):
        """What a float32 forward hands the backward: the float64 forward rounded to float32
        (`heads`: the ALiBi slopes and sinks, those given)."""
        out, lse = _reference.varlen_attention_fwd(q, k, v, cu_q, cu_k, dtype=np.float64, **options, **heads)
        return out.astype(np.float32), lse.astype(np.float32)

    def live_case(self, config: PackedConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        t = tensors
        args = (t["q"], t["k"], t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"])
        heads = {n: t[n] for n in OPTIONAL if t.get(n) is not None}
        out, lse = self.forward(*args, config.options(), heads)
        return self.case_from_reference(
            t["dout"],
            t["q"],
            t["k"],
            t["v"],
            out,
            lse,
            t["cu_seqlens_q"],
            t["cu_seqlens_k"],
            name=name,
            **heads,
            **config.options(),
        )

    def bench_variant(self, case: Case, variant: str) -> Case:
        """The case with ALiBi slopes, sinks or both (`with_heads`; the stand-in lse is as good)."""
        return with_heads(case, variant)

    def bench_cases(self, dense: Mapping[str, np.ndarray], causal: bool) -> List[Case]:
        """The dense backward, packed; out and lse are stand-ins of the right magnitude (timing
        does not depend on their values)."""
        b, h, s, d = dense["q"].shape
        cu = np.arange(b + 1, dtype=np.int32) * s
        rows = np.arange(s, dtype=np.float64)
        visible = rows + 1 if causal else np.full(s, float(s))
        lse = np.broadcast_to((np.log(visible) + 0.5)[None, :, None], (b, s, h)).reshape(b * s, h)
        packed = {n: np.ascontiguousarray(t.transpose(0, 2, 1, 3).reshape(-1, h, d)) for n, t in dense.items()}
        return [
            self.case_from_reference(
                packed["dout"], packed["q"], packed["k"], packed["v"], packed["v"], lse.astype(np.float32), cu, cu, causal=causal
            )
        ]


INTERFACE = VarlenBwd()
