"""Argument checks shared by the packed variable-length interfaces (flash_fwd, varlen_bwd):
float tensors, cu_seqlens prefix sums and the option set of wgattn.reference's varlen functions
(causal, window, softcap, scale, causal_align)."""

from __future__ import annotations

from typing import Dict, List, Mapping, Tuple

import numpy as np

from .. import reference as _reference
from . import Option

__all__ = [
    "CAUSAL_ALIGNS",
    "U32_MAX",
    "I32_MAX",
    "float3",
    "cu_seqlens",
    "qkv",
    "options",
    "clip_window",
    "DEFAULT_OPTIONS",
    "SOFTCAP_SPECS",
    "Spec",
    "random_packed",
]

CAUSAL_ALIGNS = _reference.CAUSAL_ALIGNS
I32_MAX = 2**31 - 1
U32_MAX = 2**32 - 1


def float3(x, name: str, doc: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise ValueError(f"{name} must be a float array {doc}, got dtype {a.dtype}")
    if a.ndim != 3:
        raise ValueError(f"{name} must be 3-D {doc}, got shape {tuple(a.shape)}")
    return np.ascontiguousarray(a, dtype=np.float32)


def cu_seqlens(x, name: str, total: int, total_name: str) -> np.ndarray:
    """wgattn.reference's check of a prefix-sum array, as int32 for the kernels."""
    return _reference.check_cu_seqlens(x, name, total, total_name).astype(np.int32)


def options(options: Mapping[str, Option], head_dim: int) -> Tuple[int, int, int, float, float]:
    """(window_left, window_right with causal folded in, align_top_left, softcap, scale), checked
    by wgattn.reference.check_varlen_options: the reference's rules and messages, nothing else."""
    o = _reference.check_varlen_options(
        head_dim, **{name: options.get(name, default) for name, default in DEFAULT_OPTIONS.items()}
    )
    return o.left, o.right, int(o.causal_align == "top_left"), o.softcap, o.scale


def params(q: np.ndarray, k: np.ndarray, cu_q: np.ndarray, opts: Mapping[str, Option]) -> Dict[str, float]:
    """The Params fields flash_fwd and varlen_bwd share: sizes, the checked options (`options`),
    and the window clipped (`clip_window`)."""
    total_q, hq, d = q.shape
    total_k, hkv, _ = k.shape
    left, right, top_left, softcap, scale = options(opts, d)
    left, right = clip_window(left, right, total_q, total_k)
    return {
        "total_q": int(total_q),
        "total_k": int(total_k),
        "heads_q": int(hq),
        "heads_kv": int(hkv),
        "head_dim": int(d),
        "batch_size": int(cu_q.shape[0] - 1),
        "window_left": left,
        "window_right": right,
        "align_top_left": top_left,
        "softcap": softcap,
        "scale": scale,
    }


def clip_window(left: int, right: int, total_q: int, total_k: int):
    """A bound of total_q + total_k or more excludes nothing (|i + offset - j| < total_q + total_k):
    make it -1, which keeps the kernels' i32 index arithmetic far from overflow."""
    reach = total_q + total_k
    return (-1 if left >= reach else left), (-1 if right >= reach else right)


def qkv(inputs: Mapping[str, np.ndarray], copies: int = 1):
    """q, k, v (float32, [total, heads, D], GQA shapes) and the int32 prefix sums, validated.
    `copies`: how many [total, heads, D] tensors share one buffer (element indices fit in u32)."""
    q = float3(inputs["q"], "q", "[total_q, Hq, D]")
    k = float3(inputs["k"], "k", "[total_k, Hkv, D]")
    v = float3(inputs["v"], "v", "[total_k, Hkv, D]")
    total_q, hq, d = q.shape
    total_k, hkv, dk = k.shape
    if d < 1:
        raise ValueError(f"q head dim D must be >= 1, got shape {q.shape}")
    if dk != d:
        raise ValueError(f"k head dim must equal q head dim {d}, got k shape {k.shape}")
    if v.shape != k.shape:
        raise ValueError(f"v must have k's shape {k.shape} [total_k, Hkv, D], got {v.shape}")
    if hq < 1 or hkv < 1:
        raise ValueError(f"head counts must be >= 1, got q heads {hq} and k/v heads {hkv}")
    if hq % hkv:
        raise ValueError(f"q heads ({hq}) must be a multiple of k/v heads ({hkv}) for grouped-query attention")
    if copies * total_q * hq * d > U32_MAX or copies * total_k * hkv * d > U32_MAX:
        raise ValueError(f"q ({q.shape}) or k ({k.shape}) is too large: element indices must fit in u32")
    if total_q > I32_MAX or total_k > I32_MAX:
        raise ValueError("total_q and total_k must fit in i32")
    cu_q = cu_seqlens(inputs["cu_seqlens_q"], "cu_seqlens_q", total_q, "total_q (q.shape[0])")
    cu_k = cu_seqlens(inputs["cu_seqlens_k"], "cu_seqlens_k", total_k, "total_k (k.shape[0])")
    if cu_q.shape != cu_k.shape:
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k must have the same length (batch+1), got {cu_q.shape[0]} and {cu_k.shape[0]}"
        )
    return q, k, v, cu_q, cu_k


# The options of wgattn.reference's varlen functions at their defaults (a grid case overrides some).
DEFAULT_OPTIONS: Dict[str, Option] = {
    "causal": False,
    "scale": None,
    "window": (-1, -1),
    "softcap": 0.0,
    "causal_align": "bottom_right",
}


def random_packed(rs: np.random.RandomState, seqs, hq: int, hkv: int, d: int, amp: float):
    """Standard-normal q, k (times amp) and v for sequences [(len_q, len_k)], packed, with their
    prefix sums: (q, k, v, cu_seqlens_q, cu_seqlens_k). Draws q, k, v in that order."""
    cu_q = np.concatenate([[0], np.cumsum([s[0] for s in seqs])]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum([s[1] for s in seqs])]).astype(np.int32)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    q = (amp * rs.standard_normal((total_q, hq, d))).astype(np.float32)
    k = (amp * rs.standard_normal((total_k, hkv, d))).astype(np.float32)
    v = rs.standard_normal((total_k, hkv, d)).astype(np.float32)
    return q, k, v, cu_q, cu_k


# Softcap on small scores (|s / cap| < 0.05) with long MQA/GQA groups and more queries than keys:
# a driver's tanh whose error is absolute near 0 (lavapipe: 1e-7, thousands of ulps) shifts every
# score by cap * 1e-7, and dv sums that over the whole group (issue 11). The forward's and the
# backward's grids both end with these (name, seqs, Hq, Hkv, D, options, amp).
# A conformance grid's row: (name, sequences [(len_q, len_k)], Hq, Hkv, D, options, input scale).
Spec = Tuple[str, List[Tuple[int, int]], int, int, int, Dict[str, Option], float]

SOFTCAP_SPECS: List[Spec] = [
    ("softcap30-mqa6-d64-unequal", [(384, 96), (200, 333)], 6, 1, 64, {"softcap": 30.0, "scale": 0.05}, 1.0),
    ("softcap50-causal-br-mqa6-d64", [(384, 96), (200, 333)], 6, 1, 64, {"softcap": 50.0, "causal": True, "scale": 0.02}, 1.0),
    (
        "softcap30-window-tl-gqa4-d64",
        [(300, 40), (150, 250)],
        8,
        2,
        64,
        {"softcap": 30.0, "window": (64, 8), "causal_align": "top_left", "scale": 0.02},
        1.0,
    ),
]
