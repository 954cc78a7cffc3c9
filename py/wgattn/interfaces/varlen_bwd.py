"""The `varlen_bwd` interface: the backward of packed variable-length attention (FlashAttention-2
formulas), three passes over separate token-major f32 buffers plus 48 bytes of params
(shaders/interfaces/varlen_bwd.wgsl).

    q, out, dout: [total_q, Hq, D] float32        k, v: [total_k, Hkv, D] (Hq % Hkv == 0)
    lse:          [total_q, Hq], the forward's natural-log LSE; -inf (or +inf) on rows with no key
    cu_seqlens_q, cu_seqlens_k: int32 [batch + 1] prefix sums (empty sequences allowed)
    outputs:      dq [total_q, Hq, D], dk and dv [total_k, Hkv, D]

Options: causal, window (left, right) (-1 unbounded), softcap (0 off), scale (None: 1/sqrt(D)),
causal_align ("bottom_right" | "top_left"), exactly wgattn.reference.varlen_attention_bwd's
keywords. The host folds causal into window_right = min(right, 0) (right -1 -> 0).

Buffers: stats holds [lse; delta] ([2, total_q, Hq]; the kernel's first pass fills delta);
dkv holds [dk; dv] ([2, total_k, Hkv, D]).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping

import numpy as np

from .. import ranges
from .. import reference as _reference
from ..plan import Output
from ._varlen import (
    CAP_SCALE_ROWS,
    DEFAULT_OPTIONS,
    MASK_ROWS,
    SOFTCAP_ROWS,
    PackedConfig,
    PackedInterface,
    case_options,
    keywords,
    options,
    params,
    qkv,
    random_packed,
    row,
    seqs_label,
)
from .base import Case, Layout, Option, data_buffer, out_buffer

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "VarlenBwd", "VarlenBwdConfig", "naive_f16"]

INPUTS = ("q", "k", "v", "out", "dout", "lse", "cu_seqlens_q", "cu_seqlens_k")


def _present(inputs: Mapping[str, np.ndarray]) -> None:
    for name in INPUTS:
        if inputs.get(name) is None:
            raise ValueError(f"{name} is missing from the case's inputs")


def _arrays(inputs: Mapping[str, np.ndarray]):
    """The inputs checked (wgattn.reference's checkers, then the kernels' index limits) and
    converted: float32 tensors, int32 prefix sums."""
    _present(inputs)
    i = inputs
    q, k, v, cu_q, cu_k = qkv(i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"], copies=2)  # dkv: dk and dv
    out, dout, lse = _grads(i, q.shape)
    return q, k, v, out, dout, lse, cu_q, cu_k


def naive_f16(case: Case) -> Dict[str, np.ndarray]:
    """A naive float16 backward, PyTorch's math path in half precision (flash_fwd.naive_f16's
    counterpart): every tensor (scores, P from the given lse, dP, delta, dS, the gradients) is
    stored as float16, each product accumulated in float32 and rounded once (NumPy's float16
    matmul); a group's query heads add their dk and dv in float16. The yardstick for backward
    kernels that compute in f16."""
    q, k, v, out, dout, lse, cu_q, cu_k = _arrays(case.inputs)
    total_q, hq, d = q.shape
    total_k, hkv, _ = k.shape
    o = options(case.options, d)
    h16 = np.float16
    dq = np.zeros((total_q, hq, d), dtype=h16)
    dk = np.zeros((total_k, hkv, d), dtype=h16)
    dv = np.zeros((total_k, hkv, d), dtype=h16)
    scale = h16(o.scale)
    with np.errstate(all="ignore"):  # -inf on masked scores and empty rows is intended
        for q0, q1, k0, k1, visible in _reference.visible_sequences(cu_q, cu_k, o.causal_align, o.left, o.right):
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
                row_lse = lse[q0:q1, h].astype(h16)[:, None]
                p = np.where(visible & np.isfinite(row_lse), np.exp((s - row_lse).astype(h16)), h16(0)).astype(h16)
                dp = go @ vh.T
                delta = (go * out[q0:q1, h].astype(h16)).sum(axis=1, keepdims=True, dtype=h16)
                ds = (p * (dp - delta) * slope).astype(h16)
                dq[q0:q1, h] = (ds @ kh) * scale
                dk[k0:k1, g] += (ds.T @ qh) * scale
                dv[k0:k1, g] += p.T @ go
    return {"dq": dq, "dk": dk, "dv": dv}


def _grads(i: Mapping[str, np.ndarray], q_shape):
    dout, out, lse = _reference.check_varlen_grad_inputs(i["dout"], i["out"], i["lse"], q_shape)
    return tuple(np.ascontiguousarray(t, dtype=np.float32) for t in (out, dout, lse))


@dataclass
class VarlenBwdConfig(PackedConfig):
    """varlen_bwd's live configuration: the forward's, whose float64 output and lse (rounded to
    float32, what a float32 forward hands over) the backward takes with a drawn dout."""


class VarlenBwd(PackedInterface):
    name = "varlen_bwd"
    OUTPUTS = ("dq", "dk", "dv")
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
        """The scores, and the gradients (wgattn.ranges.gradients), over the longest sequence's
        keys or a key's rows (a group's query heads each)."""
        _present(case.inputs)
        a, o = self.packed(case)
        i = case.inputs
        dout, out, _ = _reference.check_varlen_grad_inputs(i["dout"], i["out"], i["lse"], a.q.shape)
        longest = [int(np.diff(cu).max()) if cu.shape[0] > 1 else 0 for cu in (a.cu_q, a.cu_k)]
        n = max(longest[1], a.group * longest[0])
        return [ranges.scores(o.scale, a.q, a.k), ranges.gradients(o.scale, a.q, a.k, a.v, dout, out, n)]

    def layout(self, case: Case) -> Layout:
        q, k, v, out, dout, lse, cu_q, cu_k = _arrays(case.inputs)
        total_q, hq, d = q.shape
        total_k, hkv, _ = k.shape
        stats = np.concatenate([lse.ravel(), np.zeros(total_q * hq, dtype=np.float32)])
        values = params(q, k, cu_q, case.options)
        longest = [int(np.diff(cu).max()) for cu in (cu_q, cu_k) if cu.shape[0] > 1]
        values["max_seqlen"] = max(longest, default=0)
        data = {"q": q, "k": k, "v": v, "out": out, "dout": dout, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "stats": stats}
        buffers = {name: data_buffer(name, arr) for name, arr in data.items()}
        buffers["dq"] = out_buffer("dq", 4 * total_q * hq * d)
        buffers["dkv"] = out_buffer("dkv", 4 * 2 * total_k * hkv * d)
        outputs = [
            Output("dq", "dq", 0, (total_q, hq, d)),
            Output("dk", "dkv", 0, (total_k, hkv, d)),
            Output("dv", "dkv", total_k * hkv * d, (total_k, hkv, d)),
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
            dtype=dtype,
            **keywords(case),
        )
        return dict(zip(self.OUTPUTS, grads))

    def case_from_reference(
        self, dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *, name: str = "call", **keywords: Any
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
        }
        q32, k32, v32, out32, dout32, lse32, cu_q, cu_k = _arrays(inputs)
        opts = case_options(q32.shape[2], keywords)
        arrays = {
            "q": q32,
            "k": k32,
            "v": v32,
            "out": out32,
            "dout": dout32,
            "lse": lse32,
            "cu_seqlens_q": cu_q,
            "cu_seqlens_k": cu_k,
        }
        return Case(name, arrays, opts)

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
    ]

    def grid_case(self, rng, name, seqs, hq, hkv, d, options, amp) -> Case:
        q, k, v, cu_q, cu_k = random_packed(rng, seqs, hq, hkv, d, amp)
        dout = rng.standard_normal(q.shape).astype(np.float32)
        opts = dict(DEFAULT_OPTIONS)
        opts.update(options)
        out, lse = self.forward(q, k, v, cu_q, cu_k, opts)
        inputs = {"q": q, "k": k, "v": v, "out": out, "dout": dout, "lse": lse, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
        return Case(f"{name}-{seqs_label(seqs)}-h{hq}kv{hkv}", inputs, opts)

    @staticmethod
    def forward(q, k, v, cu_q, cu_k, options: Mapping[str, Option]):
        """What a float32 forward hands the backward: the float64 forward rounded to float32."""
        out, lse = _reference.varlen_attention_fwd(q, k, v, cu_q, cu_k, dtype=np.float64, **options)
        return out.astype(np.float32), lse.astype(np.float32)

    def live_case(self, config: PackedConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        t = tensors
        args = (t["q"], t["k"], t["v"], t["cu_seqlens_q"], t["cu_seqlens_k"])
        out, lse = self.forward(*args, config.options())
        return self.case_from_reference(
            t["dout"], t["q"], t["k"], t["v"], out, lse, t["cu_seqlens_q"], t["cu_seqlens_k"], name=name, **config.options()
        )

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
