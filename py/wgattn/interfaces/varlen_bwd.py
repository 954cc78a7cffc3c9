"""The `varlen_bwd` interface: the backward of packed variable-length attention (FlashAttention-2
formulas), three passes over separate token-major f32 buffers plus 48 bytes of params.

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

from typing import TYPE_CHECKING, Dict, List, Mapping, Optional

import numpy as np

from .. import reference as _reference
from ..plan import Buffer, Output, Plan
from ..registry import Kernel
from . import Case, Option
from ._varlen import CAUSAL_ALIGNS, DEFAULT_OPTIONS, SOFTCAP_SPECS, Spec, float3, params, qkv, random_packed
from ._varlen import options as check_options

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["OUTPUTS", "CAUSAL_ALIGNS", "plan", "reference", "case_from_reference", "conformance_cases"]

OUTPUTS = ("dq", "dk", "dv")


# ---------------------------------------------------------------------------
# argument checking
# ---------------------------------------------------------------------------


def _arrays(inputs: Mapping[str, np.ndarray]):
    """The inputs validated and converted: float32 tensors, int32 prefix sums."""
    for name in ("q", "k", "v", "out", "dout", "lse", "cu_seqlens_q", "cu_seqlens_k"):
        if inputs.get(name) is None:
            raise ValueError(f"{name} is missing from the case's inputs")
    q, k, v, cu_q, cu_k = qkv(inputs, copies=2)  # dkv holds dk and dv
    total_q, hq, _ = q.shape
    out = float3(inputs["out"], "out", "[total_q, Hq, D]")
    dout = float3(inputs["dout"], "dout", "[total_q, Hq, D]")
    for name, t in (("out", out), ("dout", dout)):
        if t.shape != q.shape:
            raise ValueError(f"{name} must have q's shape {q.shape} [total_q, Hq, D], got {t.shape}")
    lse = np.asarray(inputs["lse"])
    if lse.dtype.kind != "f":
        raise ValueError(f"lse must be a float array [total_q, Hq], got dtype {lse.dtype}")
    if lse.shape != (total_q, hq):
        raise ValueError(f"lse must have shape {(total_q, hq)} [total_q, Hq], got {tuple(lse.shape)}")
    lse = np.ascontiguousarray(lse, dtype=np.float32)
    return q, k, v, out, dout, lse, cu_q, cu_k


# ---------------------------------------------------------------------------
# the skeleton
# ---------------------------------------------------------------------------


def plan(
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The dispatch plan running `kernel` (or WGSL `source` on its interface) on `case`:
    inputs q, k, v, out, dout, lse, cu_seqlens_q, cu_seqlens_k; options causal, window, softcap,
    scale, causal_align."""
    q, k, v, out, dout, lse, cu_q, cu_k = _arrays(case.inputs)
    total_q, hq, d = q.shape
    total_k, hkv, _ = k.shape
    stats = np.concatenate([lse.ravel(), np.zeros(total_q * hq, dtype=np.float32)])
    values = params(q, k, cu_q, case.options)
    iface = kernel.interface
    data = {"q": q, "k": k, "v": v, "out": out, "dout": dout, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k, "stats": stats}
    buffers = [Buffer(name, arr.nbytes, "storage", arr.tobytes()) for name, arr in data.items()]
    buffers.append(Buffer("dq", 4 * total_q * hq * d, "storage", read=True))
    buffers.append(Buffer("dkv", 4 * 2 * total_k * hkv * d, "storage", read=True))
    buffers.append(Buffer("params", iface.params_size, "uniform", iface.pack_params(values)))
    return Plan(
        buffers=buffers,
        dispatches=kernel.dispatches(
            values, iface.bind(b.name for b in buffers), source=source, entry_points=entry_points, overrides=overrides
        ),
        outputs=[
            Output("dq", "dq", 0, (total_q, hq, d)),
            Output("dk", "dkv", 0, (total_k, hkv, d)),
            Output("dv", "dkv", total_k * hkv * d, (total_k, hkv, d)),
        ],
    )


def _keywords(case: Case) -> Dict[str, Option]:
    """The case's options as the reference's keywords, unconverted: the reference checks them."""
    return {name: case.options.get(name, default) for name, default in DEFAULT_OPTIONS.items()}


def reference(case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]:
    """wgattn.reference.varlen_attention_bwd on the case (dtype float32: the naive float32 run)."""
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
        **_keywords(case),
    )
    return dict(zip(OUTPUTS, grads))


def case_from_reference(
    dout,
    q,
    k,
    v,
    out,
    lse,
    cu_seqlens_q,
    cu_seqlens_k,
    *,
    causal=False,
    scale=None,
    window=(-1, -1),
    softcap=0.0,
    causal_align="bottom_right",
    name="call",
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
    options: Dict[str, Option] = {
        "causal": causal,
        "scale": scale,
        "window": window,
        "softcap": softcap,
        "causal_align": causal_align,
    }
    check_options(options, q32.shape[2])
    options["window"] = tuple(int(w) for w in window)
    options["causal"] = bool(causal)
    return Case(
        name,
        {"q": q32, "k": k32, "v": v32, "out": out32, "dout": dout32, "lse": lse32, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k},
        options,
    )


# ---------------------------------------------------------------------------
# the conformance grid
# ---------------------------------------------------------------------------

# (name, sequences [(len_q, len_k)], Hq, Hkv, D, options, input scale)
_SPECS: List[Spec] = [
    ("dense-d59-mha-unequal", [(113, 203), (203, 113)], 2, 2, 59, {}, 1.0),
    ("causal-br-d64-mqa-empty-seqs", [(37, 0), (0, 29), (50, 50), (0, 0), (17, 71), (45, 19)], 4, 1, 64, {"causal": True}, 1.0),
    ("causal-tl-d111-gqa3", [(80, 40), (40, 80), (1, 147)], 6, 2, 111, {"causal": True, "causal_align": "top_left"}, 1.0),
    ("causal-br-d130-mqa-empty-rows", [(90, 60), (33, 33)], 3, 1, 130, {"causal": True}, 1.0),
    ("window-left-br-d64", [(70, 100), (100, 70)], 2, 2, 64, {"window": (16, -1)}, 1.0),
    ("window-right-tl-d59-gqa3", [(60, 90), (90, 60)], 3, 1, 59, {"window": (-1, 5), "causal_align": "top_left"}, 1.0),
    ("window-both-causal-br-d130", [(77, 77), (40, 120)], 2, 1, 130, {"window": (8, 3), "causal": True}, 1.0),
    ("window-0-0-tl-d64-empty-rows", [(5, 3), (40, 64), (64, 40)], 2, 2, 64, {"window": (0, 0), "causal_align": "top_left"}, 1.0),
    ("window-left-0-br-d111", [(50, 80), (80, 50)], 3, 3, 111, {"window": (0, -1)}, 1.0),
    ("window-right-0-tl-d64-gqa3", [(33, 33), (20, 45)], 6, 2, 64, {"window": (-1, 0), "causal_align": "top_left"}, 1.0),
    ("softcap-d64-gqa3", [(64, 96), (31, 31)], 3, 1, 64, {"softcap": 5.0, "scale": 0.5}, 1.0),
    ("softcap-causal-tl-d130-big", [(48, 70)], 2, 2, 130, {"softcap": 20.0, "causal": True, "causal_align": "top_left"}, 2.0),
    ("neg-scale-window-d59", [(40, 57), (57, 40)], 2, 1, 59, {"scale": -0.3, "window": (6, 6)}, 1.0),
    ("long-causal-br-d64", [(1023, 1024)], 2, 1, 64, {"causal": True}, 1.0),
    ("long-dense-d64-gqa3", [(160, 1024)], 3, 1, 64, {}, 1.0),
]
_SPECS += SOFTCAP_SPECS  # appended last, so the cases before keep their random draws


def _make_case(
    rs: np.random.RandomState, name: str, seqs, hq: int, hkv: int, d: int, options: Dict[str, Option], amp: float
) -> Case:
    q, k, v, cu_q, cu_k = random_packed(rs, seqs, hq, hkv, d, amp)
    dout = rs.standard_normal(q.shape).astype(np.float32)
    opts = dict(DEFAULT_OPTIONS)
    opts.update(options)
    # What a float32 forward hands over: the float64 forward rounded to float32.
    out, lse = _reference.varlen_attention_fwd(q, k, v, cu_q, cu_k, dtype=np.float64, **opts)
    inputs = {
        "q": q,
        "k": k,
        "v": v,
        "out": out.astype(np.float32),
        "dout": dout,
        "lse": lse.astype(np.float32),
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
    }
    return Case(f"{name}-{'+'.join(f'{a}x{b}' for a, b in seqs)}-h{hq}kv{hkv}", inputs, opts)


def conformance_cases(seed: int = 0) -> List[Case]:
    """Head dims 59, 64, 111, 130 (past the 64-column chunk); GQA 1, 3 and all-to-one; empty
    sequences (no queries, no keys); unequal lengths both ways; causal in both alignments
    (bottom-right with len_q > len_k leaves rows with no key); windows left, right, both, and the
    0 edges (keys no query sees); softcap; a negative scale; long rows:
    1023 x 1024 causal and 160 x 1024 dense at D = 64."""
    rs = np.random.RandomState(seed)
    return [_make_case(rs, *spec) for spec in _SPECS]
