"""The `flash_fwd` interface: packed variable-length attention forward with LSE carrying every knob
of wgattn's contract (the forward that `varlen_bwd` differentiates), over separate token-major f32
buffers plus 48 bytes of params.

    q:            [total_q, Hq, D] float32        k, v: [total_k, Hkv, D] (Hq % Hkv == 0)
    cu_seqlens_q, cu_seqlens_k: int32 [batch + 1] prefix sums (empty sequences allowed)
    outputs:      out [total_q, Hq, D], lse [total_q, Hq] (natural log; -inf on rows with no key)

Options: causal, window (left, right) (-1 unbounded), softcap (0 off), scale (None: 1/sqrt(D)),
causal_align ("bottom_right" | "top_left"): exactly wgattn.reference.varlen_attention_fwd's
keywords. The host folds causal into window_right = min(right, 0) (right -1 -> 0).
A dense (B, H, S, D) problem is the packed one with cu_seqlens = [0, S, 2S, ...]: `dense_case`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping, Optional

import numpy as np

from .. import reference as _reference
from ..plan import Buffer, Output, Plan
from ..registry import Kernel
from . import Case, Option
from ._varlen import DEFAULT_OPTIONS, SOFTCAP_SPECS, Spec, params, qkv, random_packed
from ._varlen import options as check_options
from .sdpa_arena import near_tie_big_scores

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["OUTPUTS", "INPUTS", "plan", "reference", "case_from_reference", "dense_case", "conformance_cases"]

OUTPUTS = ("out", "lse")
INPUTS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")


def _arrays(inputs: Mapping[str, np.ndarray]):
    """The inputs validated and converted: float32 tensors, int32 prefix sums."""
    for name in INPUTS:
        if inputs.get(name) is None:
            raise ValueError(f"{name} is missing from the case's inputs; flash_fwd takes {list(INPUTS)}")
    return qkv(inputs)


def plan(
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The dispatch plan running `kernel` (or WGSL `source` on its interface) on `case`:
    inputs q, k, v, cu_seqlens_q, cu_seqlens_k; options causal, window, softcap, scale,
    causal_align."""
    q, k, v, cu_q, cu_k = _arrays(case.inputs)
    total_q, hq, d = q.shape
    values = params(q, k, cu_q, case.options)
    values["max_seqlen_q"] = int(np.diff(cu_q).max()) if cu_q.shape[0] > 1 else 0
    iface = kernel.interface
    data = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
    buffers = [Buffer(name, arr.nbytes, "storage", arr.tobytes()) for name, arr in data.items()]
    buffers.append(Buffer("out", 4 * total_q * hq * d, "storage", read=True))
    buffers.append(Buffer("lse", 4 * total_q * hq, "storage", read=True))
    buffers.append(Buffer("params", iface.params_size, "uniform", iface.pack_params(values)))
    return Plan(
        buffers=buffers,
        dispatches=kernel.dispatches(
            values, iface.bind(b.name for b in buffers), source=source, entry_points=entry_points, overrides=overrides
        ),
        outputs=[Output("out", "out", 0, (total_q, hq, d)), Output("lse", "lse", 0, (total_q, hq))],
    )


def _keywords(case: Case) -> Dict[str, Option]:
    """The case's options as the reference's keywords, unconverted: the reference checks them."""
    return {name: case.options.get(name, default) for name, default in DEFAULT_OPTIONS.items()}


def reference(case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]:
    """wgattn.reference.varlen_attention_fwd on the case (dtype float32: the naive float32 run;
    float16: the naive float16 run, `naive_f16`)."""
    if np.dtype(dtype) == np.float16:
        return naive_f16(case)
    i = case.inputs
    out, lse = _reference.varlen_attention_fwd(
        i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"], dtype=dtype, **_keywords(case)
    )
    return {"out": out, "lse": lse}


def naive_f16(case: Case) -> Dict[str, np.ndarray]:
    """A naive float16 attention, PyTorch's math path in half precision: every tensor (scores,
    probabilities, out, lse) is stored as float16, each product accumulated in float32 and
    rounded once (NumPy's float16 matmul), softmax on float16 scores. The yardstick for kernels
    that compute in f16 (the tolerance rule's "naive implementation in the same precision")."""
    i = case.inputs
    q, k, v, cu_q, cu_k = _arrays(i)
    total_q, hq, d = q.shape
    hkv = k.shape[1]
    left, right, top_left, softcap, scale = check_options(case.options, d)
    align = "top_left" if top_left else "bottom_right"
    h16 = np.float16
    out = np.zeros((total_q, hq, d), dtype=h16)
    lse = np.full((total_q, hq), -np.inf, dtype=h16)
    with np.errstate(all="ignore"):  # -inf on masked scores and empty rows is intended
        for b in range(cu_q.shape[0] - 1):
            q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
            if q1 == q0 or k1 == k0:
                continue  # no rows, or rows with no key: out 0, lse -inf
            visible = _reference._seq_mask(q1 - q0, k1 - k0, align, left, right)
            for h in range(hq):
                g = h // (hq // hkv)
                s = (q[q0:q1, h].astype(h16) @ k[k0:k1, g].astype(h16).T) * h16(scale)
                if softcap > 0:
                    s = (h16(softcap) * np.tanh(s / h16(softcap))).astype(h16)
                s = np.where(visible, s, h16(-np.inf))
                m = s.max(axis=1, keepdims=True)
                m = np.where(np.isfinite(m), m, h16(0))
                e = np.exp((s - m).astype(h16))
                total = e.sum(axis=1, keepdims=True, dtype=h16)
                p = np.where(total > 0, e / total, h16(0)).astype(h16)
                out[q0:q1, h] = p @ v[k0:k1, g].astype(h16)
                lse[q0:q1, h] = (np.log(total[:, 0]) + m[:, 0]).astype(h16)
    return {"out": out, "lse": lse}


def case_from_reference(
    q,
    k,
    v,
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
    """A case from varlen_attention_fwd's arguments (ValueError naming a bad one)."""
    inputs = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k}
    q32, k32, v32, cu_q, cu_k = _arrays(inputs)
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
    return Case(name, {"q": q32, "k": k32, "v": v32, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}, options)


def dense_case(q, k, v, *, causal=False, scale=None, name="dense") -> Case:
    """(B, H, S, D) tensors (PyTorch SDPA's layout) as a packed case: the benchmark's sdpa shapes.
    Causal is top-left, as PyTorch's is_causal (the same as bottom-right when Sq == Sk)."""
    arrays = [np.asarray(t) for t in (q, k, v)]
    for nm, t in zip("qkv", arrays):
        if t.ndim != 4:
            raise ValueError(f"{nm} must be 4-D [B, H, S, D], got shape {t.shape}")
    bq, hq, sq, d = arrays[0].shape
    bk, hkv, sk, dk = arrays[1].shape
    if bk != bq:
        raise ValueError(f"k's batch ({bk}) must equal q's ({bq})")
    packed = [np.ascontiguousarray(t.transpose(0, 2, 1, 3).reshape(-1, t.shape[1], t.shape[3])) for t in arrays]
    cu_q = np.arange(bq + 1, dtype=np.int32) * sq
    cu_k = np.arange(bq + 1, dtype=np.int32) * sk
    pq, pk, pv = packed
    return case_from_reference(pq, pk, pv, cu_q, cu_k, causal=causal, scale=scale, causal_align="top_left", name=name)


# ---------------------------------------------------------------------------
# the conformance grid
# ---------------------------------------------------------------------------

# (name, sequences [(len_q, len_k)], Hq, Hkv, D, options, input scale)
_SPECS: List[Spec] = [
    ("dense-d1", [(5, 147)], 2, 2, 1, {}, 1.0),
    ("dense-d59-mha-unequal", [(113, 203), (203, 113)], 2, 2, 59, {}, 1.0),
    ("causal-br-d64-mqa-empty-seqs", [(37, 0), (0, 29), (50, 50), (0, 0), (17, 71), (45, 19)], 4, 1, 64, {"causal": True}, 1.0),
    ("causal-tl-d111-gqa3", [(80, 40), (40, 80), (1, 147)], 6, 2, 111, {"causal": True, "causal_align": "top_left"}, 1.0),
    ("causal-br-d130-mqa-empty-rows", [(90, 60), (33, 33)], 3, 1, 130, {"causal": True}, 1.0),
    ("window-left-br-d64", [(70, 100), (100, 70)], 2, 2, 64, {"window": (16, -1)}, 1.0),
    ("window-right-tl-d59-gqa3", [(60, 90), (90, 60)], 3, 1, 59, {"window": (-1, 5), "causal_align": "top_left"}, 1.0),
    ("window-both-causal-br-d130", [(77, 77), (40, 120)], 2, 1, 130, {"window": (8, 3), "causal": True}, 1.0),
    ("window-0-0-tl-d64-empty-rows", [(5, 3), (40, 64), (64, 40)], 2, 2, 64, {"window": (0, 0), "causal_align": "top_left"}, 1.0),
    ("softcap-d64-gqa3", [(64, 96), (31, 31)], 3, 1, 64, {"softcap": 5.0, "scale": 0.5}, 1.0),
    ("softcap-causal-tl-d130-big", [(48, 70)], 2, 2, 130, {"softcap": 20.0, "causal": True, "causal_align": "top_left"}, 2.0),
    ("neg-scale-window-d59", [(40, 57), (57, 40)], 2, 1, 59, {"scale": -0.3, "window": (6, 6)}, 1.0),
    ("d256-causal-br-gqa2", [(70, 90)], 4, 2, 256, {"causal": True}, 1.0),
    ("d128-window-long", [(300, 700)], 2, 2, 128, {"window": (200, 50)}, 1.0),
    ("long-causal-br-d64", [(1023, 1024)], 2, 1, 64, {"causal": True}, 1.0),
    ("long-dense-d64-gqa3", [(160, 2048)], 3, 1, 64, {}, 1.0),
    ("many-short-d8", [(n % 13, (7 * n) % 11) for n in range(40)], 2, 1, 8, {"causal": True}, 1.0),
]
# Appended last, so the cases before keep their random draws.
_SPECS += SOFTCAP_SPECS + [
    # Large, nearly tied scores, exact in float32 (sdpa_arena.near_tie_big_scores, made below).
    ("near-tie-big-scores-d4-gqa2", [(32, 3), (9, 5)], 4, 2, 4, {}, 1.0),
]


def _make_case(
    rs: np.random.RandomState, name: str, seqs, hq: int, hkv: int, d: int, options: Dict[str, Option], amp: float
) -> Case:
    q, k, v, cu_q, cu_k = random_packed(rs, seqs, hq, hkv, d, amp)
    opts = dict(DEFAULT_OPTIONS)
    opts.update(options)
    inputs = {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}
    label = "+".join(f"{a}x{b}" for a, b in seqs) if len(seqs) <= 6 else f"{len(seqs)}seqs"
    return Case(f"{name}-{label}-h{hq}kv{hkv}", inputs, opts)


def conformance_cases(seed: int = 0) -> List[Case]:
    """Head dims 1, 8, 59, 64, 111, 128, 130 and 256 (the tiled kernel's largest); GQA 1, 2, 3 and
    all-to-one; empty sequences; unequal lengths both ways; causal in both alignments (bottom-right
    with len_q > len_k leaves rows with no key); windows left, right, both, the 0 edges; softcap;
    a negative scale; long rows: 1023 x 1024 causal, 160 x 2048 dense, 300 x 700 windowed."""
    rs = np.random.RandomState(seed)
    cases = [_make_case(rs, *spec) for spec in _SPECS]
    for c in cases:
        if c.name.startswith("near-tie-big-scores"):
            c.inputs["q"], c.inputs["k"] = near_tie_big_scores(c.inputs["q"], c.inputs["k"], axis_s=0)
    return cases
