"""NumPy reference implementations of the attention that wgattn's kernels compute.

These functions define the project's contract (see ``docs/contract.md``).  They
are written for clarity and exactness, not speed: everything is computed in
float64 unless ``dtype=np.float32`` is passed, in which case the *same*
algorithm runs with every input cast to float32 and every intermediate kept in
float32.  That float32 run is the "naive float32 implementation" against which
the project's tolerance rule measures kernel error.

Public functions
----------------
``varlen_attention_fwd``
    Variable-length (packed) multi-head attention forward, FlashAttention
    varlen style: returns the output and the log-sum-exp of every row.
``varlen_attention_bwd``
    Gradients of ``sum(out * dout)`` with respect to q, k, v and the sinks,
    using the FlashAttention-2 backward formulas.
``attention_probs``
    The softmax probabilities of one decoding step over a key history
    (Gemma-style sliding window, un-scaled scores by default).
``attention_probs_batched``
    ``attention_probs`` for many query positions at once, stacked.
``sdpa``
    PyTorch-shaped scaled dot-product attention on padded [B, H, S, D] or
    [B, S, H, D] tensors, with a boolean mask, causal mask and window.
``decode_attention``
    New tokens per sequence against a paged KV cache (block table,
    per-sequence lengths): one for decoding, a few for speculative decoding,
    up to the whole cache for chunked prefill; with GQA, a left window,
    softcap, ALiBi and attention sinks: the output and the log-sum-exp of
    every row.

One contract holds everywhere:

* a masked score is *excluded* from the softmax (it is not replaced by a large
  negative number);
* a query row with no visible key produces an output of exactly 0 (and an
  LSE of -inf in ``varlen_attention_fwd``), never NaN;
* finite inputs never produce NaN or floating-point warnings: the softmax
  subtracts the row maximum and handles rows with no visible key explicitly;
* grouped-query attention (GQA): with ``Hq`` query heads and ``Hkv`` key/value
  heads (``Hq % Hkv == 0``), query head ``h`` reads key/value head
  ``h // (Hq // Hkv)``;
* every bad argument raises ``ValueError`` with a message that names the
  argument and says what is allowed.

The module only needs NumPy >= 1.17 and Python >= 3.8.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

__all__ = [
    "varlen_attention_fwd",
    "varlen_attention_bwd",
    "attention_probs",
    "attention_probs_batched",
    "sdpa",
    "decode_attention",
]

# The values of ``causal_align`` and of ``sdpa``'s ``layout``: the one definition
# (wgattn.interfaces and wgattn.cases import them).
CAUSAL_ALIGNS = ("bottom_right", "top_left")
LAYOUTS = ("bhsd", "bshd")
_CAUSAL_ALIGNS = CAUSAL_ALIGNS
_LAYOUTS = LAYOUTS


# ---------------------------------------------------------------------------
# argument checking
# ---------------------------------------------------------------------------


def _check_dtype(dtype: Any) -> np.dtype:
    """The compute dtype: float32 or float64 (anything else is an error)."""
    if dtype is None:
        raise ValueError("dtype must be np.float32 or np.float64, got None")
    try:
        dt = np.dtype(dtype)
    except (TypeError, ValueError):
        raise ValueError("dtype must be np.float32 or np.float64, got %r" % (dtype,)) from None
    if dt != np.dtype(np.float32) and dt != np.dtype(np.float64):
        raise ValueError("dtype must be np.float32 or np.float64, got %s" % (dt,))
    return dt


def _float_array(x: Any, name: str, ndim: int, shape_doc: str) -> np.ndarray:
    """``x`` as an ndarray of float16/32/64 with ``ndim`` dimensions."""
    a = np.asarray(x)
    if a.dtype.kind != "f" or a.dtype.itemsize not in (2, 4, 8):
        raise ValueError("%s must be a float16, float32 or float64 array, got dtype %s" % (name, a.dtype))
    if a.ndim != ndim:
        raise ValueError("%s must be %d-D with shape %s, got shape %s" % (name, ndim, shape_doc, tuple(a.shape)))
    return a


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _is_real(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_))


def check_bool(x: Any, name: str) -> bool:
    """A flag such as ``causal``: True or False (Python or NumPy bool), nothing else.

    Integers are refused, 0 and 1 included: the interfaces pack the flag into a
    kernel's params, and one rule for every entry point is simpler than a
    table of what each coerces."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    raise ValueError("%s must be True or False, got %r" % (name, x))


# Every float parameter (a scale, a softcap) reaches the kernels as a float32: its magnitude must
# be a normal float32, or the kernel would see 0 (a subnormal flushes to 0 on many GPUs, and a
# softcap of 0 means "off": a silently different answer) or an infinity.
F32_MIN = float(np.finfo(np.float32).tiny)
F32_MAX = float(np.finfo(np.float32).max)
SCALE_MIN = F32_MIN
SCALE_MAX = F32_MAX


def _f32_ok(x: float, zero: bool, negative: bool) -> bool:
    """The one numeric rule: finite, of an allowed sign, and 0 (where allowed) or a normal
    float32 magnitude."""
    return math.isfinite(x) and (x >= 0.0 or negative) and ((x == 0.0 and zero) or F32_MIN <= abs(x) <= F32_MAX)


def check_f32(value: Any, name: str, *, zero: str = "", negative: bool = True) -> float:
    """A float parameter checked by the one numeric rule: a real number (not a bool) whose
    magnitude is a normal float32, in ``[F32_MIN, F32_MAX]``, so that the float32 the kernel
    receives is the value asked for (not 0, not infinite). ``zero``: what 0 means, when 0 is
    allowed (``"off"``); ``negative``: whether negative values are allowed."""
    x = float(value) if _is_real(value) else math.nan
    if not _f32_ok(x, bool(zero), negative):
        raise ValueError(
            "%s must be a finite real number%s: %s%s in [%.4g, %.4g] (a normal float32: the kernels "
            "compute in float32), got %r"
            % (
                name,
                "" if negative else " >= 0",
                "0 (%s) or " % zero if zero else "",
                "a magnitude" if negative else "a value",
                F32_MIN,
                F32_MAX,
                value,
            )
        )
    return x


def check_scale(scale: Any, head_dim: int) -> float:
    """The score scale as a Python float: ``None`` means ``1 / sqrt(head_dim)``;
    otherwise a real number (not a bool) whose magnitude is a normal float32,
    in ``[SCALE_MIN, SCALE_MAX]`` (negative scales are allowed): the rule of
    ``check_f32``."""
    if scale is None:
        return 1.0 / math.sqrt(head_dim)
    value = float(scale) if _is_real(scale) else math.nan
    if not _f32_ok(value, zero=False, negative=True):
        raise ValueError(
            "scale must be None or a finite nonzero real number with magnitude in "
            "[%.4g, %.4g] (a normal float32: the kernels compute in float32), got %r" % (SCALE_MIN, SCALE_MAX, scale)
        )
    return value


def _check_scale(scale: Any, head_dim: int, dt: np.dtype) -> Any:
    """The score scale (``check_scale``) as a scalar of the compute dtype."""
    return dt.type(check_scale(scale, head_dim))


def check_softcap(softcap: Any) -> float:
    """``softcap`` as a float: 0 (off), or > 0 by ``check_f32``'s rule."""
    return check_f32(softcap, "softcap", zero="off", negative=False)


def check_window_pair(window: Any, name: str = "window") -> Tuple[int, int]:
    """``(left, right)``, each an integer >= -1 (-1 = unbounded)."""
    try:
        items = tuple(window)
    except TypeError:
        raise ValueError("%s must be a pair (left, right) of integers >= -1, got %r" % (name, window)) from None
    if len(items) != 2 or not all(_is_int(w) for w in items):
        raise ValueError("%s must be a pair (left, right) of integers >= -1, got %r" % (name, window))
    left, right = int(items[0]), int(items[1])
    if left < -1 or right < -1:
        raise ValueError("%s must be (left, right) with each >= -1, got (%d, %d)" % (name, left, right))
    return left, right


def check_cu_seqlens(cu: Any, name: str, total: int, total_name: str) -> np.ndarray:
    """Validated prefix sums as a 1-D array of Python-int-safe int64 values."""
    a = np.asarray(cu)
    if a.ndim != 1:
        raise ValueError("%s must be a 1-D integer array of length batch+1, got shape %s" % (name, tuple(a.shape)))
    if a.shape[0] == 0:
        raise ValueError("%s must be a 1-D integer array of length batch+1 (at least 1), got length 0" % (name,))
    if a.dtype.kind not in "iu":
        raise ValueError("%s must be a 1-D integer array, got dtype %s" % (name, a.dtype))
    vals = [int(x) for x in a.tolist()]
    if vals[0] != 0:
        raise ValueError("%s must start at 0, got %d" % (name, vals[0]))
    for b in range(len(vals) - 1):
        if vals[b + 1] < vals[b]:
            raise ValueError("%s must be non-decreasing, got %d after %d at index %d" % (name, vals[b + 1], vals[b], b + 1))
    if vals[-1] != total:
        raise ValueError("%s must end at %s = %d, got %d" % (name, total_name, total, vals[-1]))
    return np.array(vals, dtype=np.int64)


class VarlenOptions(NamedTuple):
    """The validated options of the varlen functions (``check_varlen_options``)."""

    causal: bool
    left: int  # window bounds; -1 unbounded
    right: int  # with causal folded in: min(right, 0), -1 -> 0
    softcap: float
    scale: float  # None resolved to 1 / sqrt(D)
    causal_align: str


def check_varlen_options(
    head_dim: int,
    *,
    causal: Any = False,
    scale: Any = None,
    window: Any = (-1, -1),
    softcap: Any = 0.0,
    causal_align: Any = "bottom_right",
) -> VarlenOptions:
    """The one check of ``varlen_attention_fwd``/``_bwd``'s options; the
    interfaces (wgattn.interfaces) call it too, so every entry point accepts and
    refuses the same values with the same message."""
    causal = check_bool(causal, "causal")
    left, right = check_window_pair(window, "window")
    cap = check_softcap(softcap)
    if not isinstance(causal_align, str) or causal_align not in _CAUSAL_ALIGNS:
        raise ValueError("causal_align must be 'bottom_right' or 'top_left', got %r" % (causal_align,))
    sc = check_scale(scale, head_dim)
    return VarlenOptions(causal, left, effective_right(causal, right), cap, sc, causal_align)


def _check_gqa(hq: int, hkv: int, q_name: str, kv_name: str) -> int:
    if hq < 1 or hkv < 1:
        raise ValueError("head counts must be >= 1, got %s heads %d and %s heads %d" % (q_name, hq, kv_name, hkv))
    if hq % hkv != 0:
        raise ValueError(
            "%s heads (%d) must be a multiple of %s heads (%d) for grouped-query attention" % (q_name, hq, kv_name, hkv)
        )
    return hq // hkv


class VarlenInputs(NamedTuple):
    """``check_varlen_inputs``'s result: the arrays (dtypes kept) and the GQA group size."""

    q: np.ndarray  # [total_q, Hq, D]
    k: np.ndarray  # [total_k, Hkv, D]
    v: np.ndarray  # [total_k, Hkv, D]
    cu_q: np.ndarray  # int64 [batch + 1]
    cu_k: np.ndarray  # int64 [batch + 1]
    group: int  # Hq // Hkv
    alibi_slopes: Optional[np.ndarray]  # [Hq] float64, or None
    sinks: Optional[np.ndarray]  # [Hq] float64, or None


def check_varlen_inputs(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, alibi_slopes: Any = None, sinks: Any = None
) -> VarlenInputs:
    """The one check of the packed tensors, prefix sums and per-head parameters of
    ``varlen_attention_fwd``/``_bwd`` (the interfaces call it too): shapes, dtypes, GQA, prefix
    sums, and ALiBi slopes and sinks by ``decode_attention``'s rule (one finite float32 value per
    query head)."""
    q = _float_array(q, "q", 3, "[total_q, Hq, D]")
    k = _float_array(k, "k", 3, "[total_k, Hkv, D]")
    v = _float_array(v, "v", 3, "[total_k, Hkv, D]")
    total_q, hq, d = q.shape
    total_k, hkv, dk = k.shape
    if d < 1:
        raise ValueError("q head dim D must be >= 1, got shape %s" % (tuple(q.shape),))
    if dk != d:
        raise ValueError("k head dim must equal q head dim %d, got k shape %s" % (d, tuple(k.shape)))
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError("v must have k's shape %s [total_k, Hkv, D], got %s" % (tuple(k.shape), tuple(v.shape)))
    group = _check_gqa(hq, hkv, "q", "k/v")
    cu_q = check_cu_seqlens(cu_seqlens_q, "cu_seqlens_q", total_q, "total_q (q.shape[0])")
    cu_k = check_cu_seqlens(cu_seqlens_k, "cu_seqlens_k", total_k, "total_k (k.shape[0])")
    if cu_q.shape[0] != cu_k.shape[0]:
        raise ValueError(
            "cu_seqlens_q and cu_seqlens_k must have the same length (batch+1), got %d and %d" % (cu_q.shape[0], cu_k.shape[0])
        )
    slopes = _head_params(alibi_slopes, "alibi_slopes", hq)
    return VarlenInputs(q, k, v, cu_q, cu_k, group, slopes, _head_params(sinks, "sinks", hq))


def check_varlen_grad_inputs(
    dout: Any, out: Any, lse: Any, q_shape: Tuple[int, ...]
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``varlen_attention_bwd``'s dout and out ([total_q, Hq, D], q's shape) and lse ([total_q, Hq])."""
    total_q, hq = q_shape[0], q_shape[1]
    dout = _float_array(dout, "dout", 3, "[total_q, Hq, D]")
    out = _float_array(out, "out", 3, "[total_q, Hq, D]")
    lse = _float_array(lse, "lse", 2, "[total_q, Hq]")
    if tuple(dout.shape) != tuple(q_shape):
        raise ValueError("dout must have q's shape %s [total_q, Hq, D], got %s" % (tuple(q_shape), tuple(dout.shape)))
    if tuple(out.shape) != tuple(q_shape):
        raise ValueError("out must have q's shape %s [total_q, Hq, D], got %s" % (tuple(q_shape), tuple(out.shape)))
    if tuple(lse.shape) != (total_q, hq):
        raise ValueError("lse must have shape %s [total_q, Hq], got %s" % ((total_q, hq), tuple(lse.shape)))
    return dout, out, lse


def _check_history(q: np.ndarray, k_hist: np.ndarray) -> int:
    """Head dims, GQA and history length of the probability functions; the group size."""
    hq, d = q.shape[-2], q.shape[-1]
    history_len, hkv, dk = k_hist.shape
    if d < 1:
        raise ValueError("q head dim D must be >= 1, got shape %s" % (tuple(q.shape),))
    if dk != d:
        raise ValueError("k_hist head dim must equal q head dim %d, got k_hist shape %s" % (d, tuple(k_hist.shape)))
    group = _check_gqa(hq, hkv, "q", "k_hist")
    if history_len < 1:
        raise ValueError("k_hist must hold at least one key (history_len >= 1), got shape %s" % (tuple(k_hist.shape),))
    return group


def check_window_count(window: Any) -> int:
    """The probability functions' window: an integer >= 0 (0 = unbounded)."""
    if not _is_int(window) or int(window) < 0:
        raise ValueError("window must be an integer >= 0 (0 = unbounded), got %r" % (window,))
    return int(window)


def check_probs_inputs(q: Any, k_hist: Any, pos: Any, window: Any) -> Tuple[np.ndarray, np.ndarray, int, int, int]:
    """``attention_probs``'s arguments checked: (q, k_hist, pos, window, group)."""
    q = _float_array(q, "q", 2, "[Hq, D]")
    k_hist = _float_array(k_hist, "k_hist", 3, "[history_len, Hkv, D]")
    group = _check_history(q, k_hist)
    history_len = k_hist.shape[0]
    if not _is_int(pos):
        raise ValueError("pos must be an integer in [0, history_len), got %r" % (pos,))
    if int(pos) < 0 or int(pos) >= history_len:
        raise ValueError("pos must be in [0, history_len) = [0, %d), got %d" % (history_len, int(pos)))
    return q, k_hist, int(pos), check_window_count(window), group


def check_probs_batched_inputs(
    q: Any, k_hist: Any, positions: Any, window: Any
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """``attention_probs_batched``'s arguments checked: (q, k_hist, positions as int64, window, group)."""
    q = _float_array(q, "q", 3, "[n_pos, Hq, D]")
    k_hist = _float_array(k_hist, "k_hist", 3, "[history_len, Hkv, D]")
    group = _check_history(q, k_hist)
    n_pos, history_len = q.shape[0], k_hist.shape[0]
    pos = np.asarray(positions)
    if pos.ndim != 1:
        raise ValueError("positions must be a 1-D integer array of length n_pos = %d, got shape %s" % (n_pos, tuple(pos.shape)))
    if pos.dtype.kind not in "iu" and not (pos.size == 0 and pos.dtype.kind == "f"):
        raise ValueError("positions must be a 1-D integer array, got dtype %s" % (pos.dtype,))
    if pos.shape[0] != n_pos:
        raise ValueError(
            "positions must have one entry per query row: length n_pos = q.shape[0] = %d, got length %d" % (n_pos, pos.shape[0])
        )
    pos_list = [int(p) for p in pos.tolist()]
    for i, p in enumerate(pos_list):
        if p < 0 or p >= history_len:
            raise ValueError("positions[%d] must be in [0, history_len) = [0, %d), got %d" % (i, history_len, p))
    return q, k_hist, np.array(pos_list, dtype=np.int64), check_window_count(window), group


def check_layout(layout: Any) -> str:
    """``sdpa``'s layout: "bhsd" or "bshd"."""
    if not isinstance(layout, str) or layout not in _LAYOUTS:
        raise ValueError("layout must be 'bhsd' or 'bshd', got %r" % (layout,))
    return layout


class SdpaInputs(NamedTuple):
    """``check_sdpa_inputs``'s result: q, k, v as [B, H, S, D] views (dtypes kept), the mask
    broadcast to [B, H, Sq, Sk] (or None) and the GQA group size."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    mask: Optional[np.ndarray]
    group: int


def check_sdpa_inputs(q: Any, k: Any, v: Any, mask: Any, layout: Any) -> SdpaInputs:
    """``sdpa``'s tensors, mask and layout checked (the interfaces call it too)."""
    layout = check_layout(layout)
    if layout == "bhsd":
        q_doc, kv_doc = "[B, H, Sq, D]", "[B, Hkv, Sk, D]"
    else:
        q_doc, kv_doc = "[B, Sq, H, D]", "[B, Sk, Hkv, D]"
    q = _float_array(q, "q", 4, q_doc)
    k = _float_array(k, "k", 4, kv_doc)
    v = _float_array(v, "v", 4, kv_doc)
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError("v must have k's shape %s %s, got %s" % (tuple(k.shape), kv_doc, tuple(v.shape)))
    if layout == "bshd":
        q = q.transpose(0, 2, 1, 3)
        k = k.transpose(0, 2, 1, 3)
        v = v.transpose(0, 2, 1, 3)
    bsz, hq, sq, d = q.shape
    bk, hkv, sk, dk = k.shape
    if d < 1:
        raise ValueError("q head dim D must be >= 1, got q shape %s" % (tuple(q.shape),))
    if bk != bsz:
        raise ValueError("k batch size must equal q batch size %d, got %d" % (bsz, bk))
    if dk != d:
        raise ValueError("k head dim must equal q head dim %d, got %d" % (d, dk))
    group = _check_gqa(hq, hkv, "q", "k/v")
    m = None
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != np.dtype(bool):
            raise ValueError("mask must be a boolean array (True = attend), got dtype %s" % (m.dtype,))
        target = (bsz, hq, sq, sk)
        try:
            if m.ndim > 4:
                raise ValueError
            m = np.broadcast_to(m, target)
        except ValueError:
            raise ValueError(
                "mask must be broadcastable to [B, H, Sq, Sk] = %s, got shape %s" % (target, tuple(np.shape(mask)))
            ) from None
    return SdpaInputs(q, k, v, m, group)


# ---------------------------------------------------------------------------
# shared maths
# ---------------------------------------------------------------------------


def band_mask(len_q: int, len_k: int, offset: int, left: int, right: int) -> np.ndarray:
    """Boolean [len_q, len_k]: key j visible to query i when
    ``i + offset - left <= j <= i + offset + right`` (a bound of -1 is open)."""
    i = np.arange(len_q, dtype=np.int64).reshape(len_q, 1) + offset
    j = np.arange(len_k, dtype=np.int64).reshape(1, len_k)
    mask = np.ones((len_q, len_k), dtype=bool)
    if left >= 0:
        mask &= j >= i - left
    if right >= 0:
        mask &= j <= i + right
    return mask


def effective_right(causal: bool, right: int) -> int:
    """Causal means right = 0; a window's right bound is intersected with it."""
    if not causal:
        return right
    return 0 if right == -1 else min(right, 0)


def history_start(pos: int, window: int) -> int:
    """The first key a query at position `pos` sees in a key history (``attention_probs``'s
    window: the visible keys counted with the current one, 0 unbounded); the last is `pos`."""
    return pos + 1 - window if (window != 0 and pos + 1 >= window) else 0


def history_mask(positions: Any, history_len: int, window: int) -> np.ndarray:
    """Boolean [len(positions), history_len]: the keys each query position sees."""
    p = np.asarray(positions, dtype=np.int64).reshape(-1, 1)
    t = np.arange(history_len, dtype=np.int64).reshape(1, -1)
    start = np.array([history_start(int(x), window) for x in p[:, 0]], dtype=np.int64).reshape(-1, 1)
    return (t >= start) & (t <= p)


def masked_softmax(s: np.ndarray, mask: np.ndarray, dt: np.dtype) -> Tuple[np.ndarray, np.ndarray]:
    """Softmax of ``s`` over its last axis, restricted to ``mask``.

    ``mask`` broadcasts against ``s``.  Returns ``(p, lse)``: ``p`` has ``s``'s
    shape, is 0 wherever ``mask`` is False and 0 on rows with no visible entry;
    ``lse`` has ``s.shape[:-1]`` and is -inf on rows with no visible entry.
    No invalid operation is ever evaluated for finite ``s``.
    """
    neg_inf = dt.type(-np.inf)
    zero = dt.type(0.0)
    one = dt.type(1.0)
    masked = np.where(mask, s, neg_inf).astype(dt, copy=False)
    if masked.shape[-1] == 0:
        return (
            np.zeros(masked.shape, dtype=dt),
            np.full(masked.shape[:-1], neg_inf, dtype=dt),
        )
    row_max = masked.max(axis=-1, keepdims=True)
    has_key = row_max > neg_inf
    safe_max = np.where(has_key, row_max, zero)
    # masked entries are -inf - finite = -inf, and exp(-inf) = 0 exactly.
    e = np.exp(masked - safe_max)
    denom = e.sum(axis=-1, keepdims=True)
    safe_denom = np.where(has_key, denom, one)
    p = e / safe_denom
    lse = np.where(has_key, safe_max + np.log(safe_denom), neg_inf)
    return p.astype(dt, copy=False), lse[..., 0].astype(dt, copy=False)


def _check_varlen_common(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    causal: Any,
    scale: Any,
    window: Any,
    softcap: Any,
    causal_align: Any,
    alibi_slopes: Any,
    sinks: Any,
    dtype: Any,
):
    dt = _check_dtype(dtype)
    q, k, v, cu_q, cu_k, group, slopes, sink = check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, sinks)
    d = q.shape[2]
    opts = check_varlen_options(
        d,
        causal=causal,
        scale=scale,
        window=window,
        softcap=softcap,
        causal_align=causal_align,
    )
    sc = dt.type(opts.scale)
    q, k, v = (x.astype(dt, copy=False) for x in (q, k, v))
    slopes = None if slopes is None else slopes.astype(dt)
    sink = None if sink is None else sink.astype(dt)
    return dt, q, k, v, cu_q, cu_k, group, opts.left, opts.right, opts.softcap, sc, slopes, sink


def visible_sequences(cu_q: np.ndarray, cu_k: np.ndarray, align: str, left: int, right: int):
    """(q0, q1, k0, k1, mask) for every packed sequence in which some query sees some key: its
    query rows q0:q1, its keys k0:k1 and seq_mask of them (the other sequences' rows have out 0,
    lse -inf (or the sink) and no gradient); what every varlen function and naive run walks."""
    for b in range(cu_q.shape[0] - 1):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        k0, k1 = int(cu_k[b]), int(cu_k[b + 1])
        if q1 == q0 or k1 == k0:
            continue
        mask = seq_mask(q1 - q0, k1 - k0, align, left, right)
        if mask.any():
            yield q0, q1, k0, k1, mask


def seq_mask(len_q: int, len_k: int, align: str, left: int, right: int) -> np.ndarray:
    """Boolean [len_q, len_k]: the keys each query of one packed sequence sees, for
    ``causal_align`` `align` and a window (left, right) with causal folded in
    (``effective_right``); what every varlen function and picture uses."""
    offset = len_k - len_q if align == "bottom_right" else 0
    return band_mask(len_q, len_k, offset, left, right)


def seq_distance(len_q: int, len_k: int, align: str) -> np.ndarray:
    """Integer [len_q, len_k]: |j - (i + offset)|, how far key j of one packed sequence lies from
    query i's position on the diagonal of ``causal_align`` `align`; the ALiBi bias of query head h
    is ``-alibi_slopes[h]`` times it."""
    offset = len_k - len_q if align == "bottom_right" else 0
    i = np.arange(len_q, dtype=np.int64).reshape(len_q, 1) + offset
    return np.abs(np.arange(len_k, dtype=np.int64).reshape(1, len_k) - i)


def _alibi(s: np.ndarray, slopes: Optional[np.ndarray], len_q: int, len_k: int, align: str, dt: np.dtype) -> np.ndarray:
    """Scores [Hkv, G, Lq, Lk] of one sequence plus the ALiBi bias (``slopes`` [Hq] of dtype dt,
    or None: unchanged)."""
    if slopes is None:
        return s
    hkv, group = s.shape[0], s.shape[1]
    dist = seq_distance(len_q, len_k, align).astype(dt)
    return (s - slopes.reshape(hkv, group, 1, 1) * dist).astype(dt, copy=False)


def _group_rows(x: np.ndarray, hkv: int, group: int) -> np.ndarray:
    """[L, Hq, D] -> [Hkv, group*L, D]; row g*L + i holds head kv*group + g."""
    length, _, d = x.shape
    return x.reshape(length, hkv, group, d).transpose(1, 2, 0, 3).reshape(hkv, group * length, d)


def _ungroup_rows(x: np.ndarray, length: int) -> np.ndarray:
    """Inverse of ``_group_rows`` for [Hkv, group*L, ...] -> [L, Hq, ...]."""
    hkv = x.shape[0]
    group = x.shape[1] // length if length else 0
    rest = x.shape[2:]
    y = x.reshape((hkv, group, length) + rest)
    axes = (2, 0, 1) + tuple(range(3, y.ndim))
    return y.transpose(axes).reshape((length, hkv * group) + rest)


def _capped_scores(qg: np.ndarray, kg: np.ndarray, sc: Any, cap: float, dt: np.dtype):
    """Scaled (and soft-capped) scores [Hkv, R, Lk] plus tanh for the chain rule."""
    s = np.matmul(qg, kg.transpose(0, 2, 1)) * sc
    if cap > 0.0:
        c = dt.type(cap)
        t = np.tanh(s / c)
        return (c * t).astype(dt, copy=False), t.astype(dt, copy=False)
    return s.astype(dt, copy=False), None


def _quiet_underflow(fn):
    """Run ``fn`` with floating-point underflow ignored.

    Underflow to a subnormal or 0 (e.g. exp of a very negative score) is the
    expected behaviour of a softmax and is not an error, even when the caller
    runs under ``np.errstate(all="raise")``; overflow, invalid and divide
    keep the caller's settings (and never occur for finite inputs).
    """

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with np.errstate(under="ignore"):
            return fn(*args, **kwargs)

    return wrapper


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


@_quiet_underflow
def varlen_attention_fwd(
    q: Any,
    k: Any,
    v: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    window: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    causal_align: str = "bottom_right",
    alibi_slopes: Any = None,
    sinks: Any = None,
    dtype: Any = np.float64,
) -> Tuple[np.ndarray, np.ndarray]:
    """Packed variable-length attention forward (FlashAttention varlen style).

    Arguments:
        q: [total_q, Hq, D] float16/32/64, the queries of all sequences packed
            one after another along axis 0.
        k: [total_k, Hkv, D], the keys, packed the same way.
        v: [total_k, Hkv, D], the values.
        cu_seqlens_q: [batch + 1] integers, prefix sums of the query lengths:
            sequence b owns rows cu_seqlens_q[b] : cu_seqlens_q[b + 1] of q.
            Starts at 0, non-decreasing (empty sequences allowed), ends at
            total_q.
        cu_seqlens_k: [batch + 1] integers, the same for k and v (ends at
            total_k).  Both prefix-sum arrays must have the same length.
        causal: apply a causal mask (equivalent to right = 0 in the window).
        scale: score scale; None means 1 / sqrt(D).  Any finite nonzero real.
        window: (left, right), inclusive bounds of the visible key band around
            the aligned diagonal; -1 leaves that side unbounded.  With causal,
            right becomes min(right, 0) (and -1 becomes 0).
        softcap: if > 0, scores become softcap * tanh(score / softcap) after
            scaling and before masking; 0 turns it off.
        causal_align: where the causal diagonal (and the window band) sits
            when len_q != len_k for a sequence:
            "bottom_right" (FlashAttention >= 2.1): offset = len_k - len_q;
            "top_left" (PyTorch is_causal, the original varlen_fwd kernel): offset = 0.
        alibi_slopes: None or [Hq]: score += -alibi_slopes[h] * |j - (i + offset)|
            after softcap (FlashAttention's alibi_slopes; on a causal row it is
            decode_attention's slope * (key_pos - query_pos)).
        sinks: None or [Hq]: a logit per query head that joins every row's
            softmax denominator and nothing else (gpt-oss); not scaled, capped or
            biased.
        dtype: np.float64 (default) or np.float32; every input is cast to it
            and every intermediate is kept in it.

    With the offset above, query i of a sequence sees key j when
    ``i + offset - left <= j <= i + offset + right`` (a bound of -1 drops that
    side).  Grouped-query attention: query head h reads k/v head
    ``h // (Hq // Hkv)``; Hq must be a multiple of Hkv.

    Returns:
        out: [total_q, Hq, D] of dtype; softmax(masked scores) @ v per row, and
            exactly 0 on a row with no visible key.
        lse: [total_q, Hq] of dtype (token-major), natural log of the softmax
            denominator: the sum of exp of the visible (scaled, soft-capped,
            biased) scores, plus exp(sinks[h]) with sinks; on a row with no
            visible key -inf, or sinks[h] with sinks.

    Masks (1 = visible), causal=True, 3 queries x 5 keys and 5 queries x 3 keys::

        mask: len_q=3 len_k=5 causal=True window=(-1, -1) align=bottom_right
             k0 k1 k2 k3 k4
        q0    1  1  1  .  .
        q1    1  1  1  1  .
        q2    1  1  1  1  1

        mask: len_q=3 len_k=5 causal=True window=(-1, -1) align=top_left
             k0 k1 k2 k3 k4
        q0    1  .  .  .  .
        q1    1  1  .  .  .
        q2    1  1  1  .  .

        mask: len_q=5 len_k=3 causal=True window=(-1, -1) align=bottom_right
             k0 k1 k2
        q0    .  .  .
        q1    .  .  .
        q2    1  .  .
        q3    1  1  .
        q4    1  1  1

        mask: len_q=5 len_k=3 causal=True window=(-1, -1) align=top_left
             k0 k1 k2
        q0    1  .  .
        q1    1  1  .
        q2    1  1  1
        q3    1  1  1
        q4    1  1  1

    Rows q0 and q1 of the bottom-right 5x3 mask see no key: out 0, lse -inf.
    A window, e.g. window=(1, 1) without causal, and window=(1, -1) with::

        mask: len_q=5 len_k=3 causal=False window=(1, 1) align=bottom_right
             k0 k1 k2
        q0    .  .  .
        q1    1  .  .
        q2    1  1  .
        q3    1  1  1
        q4    .  1  1

        mask: len_q=3 len_k=5 causal=True window=(1, -1) align=bottom_right
             k0 k1 k2 k3 k4
        q0    .  1  1  .  .
        q1    .  .  1  1  .
        q2    .  .  .  1  1

    The ALiBi bias in slopes, -|j - (i + offset)|, on the visible keys of a
    right window of 1 without causal (both sides of the diagonal)::

        alibi: len_q=3 len_k=5 causal=False window=(-1, 1) align=bottom_right
             k0 k1 k2 k3 k4
        q0   -2 -1  0 -1  .
        q1   -3 -2 -1  0 -1
        q2   -4 -3 -2 -1  0
    """
    dt, q, k, v, cu_q, cu_k, group, left, right, cap, sc, slopes, sink = _check_varlen_common(
        q, k, v, cu_seqlens_q, cu_seqlens_k, causal, scale, window, softcap, causal_align, alibi_slopes, sinks, dtype
    )
    total_q, hq, d = q.shape
    hkv = k.shape[1]
    out = np.zeros((total_q, hq, d), dtype=dt)
    # a row with no visible key: -inf, or the log of the sink's term alone
    lse = np.full((total_q, hq), -np.inf, dtype=dt) if sink is None else np.tile(sink, (total_q, 1))
    sink_rows = None if sink is None else sink.reshape(hkv, group, 1)
    for q0, q1, k0, k1, mask in visible_sequences(cu_q, cu_k, causal_align, left, right):
        len_q, len_k = mask.shape
        qg = _group_rows(q[q0:q1], hkv, group)  # [Hkv, G*Lq, D]
        kg = k[k0:k1].transpose(1, 0, 2)  # [Hkv, Lk, D]
        vg = v[k0:k1].transpose(1, 0, 2)
        s, _ = _capped_scores(qg, kg, sc, cap, dt)  # [Hkv, G*Lq, Lk]
        s = _alibi(s.reshape(hkv, group, len_q, len_k), slopes, len_q, len_k, causal_align, dt)
        p, row_lse = _softmax_with_sink(s, mask, sink_rows, dt)
        o = np.matmul(p.reshape(hkv, group * len_q, len_k), vg)
        out[q0:q1] = _ungroup_rows(o, len_q)
        lse[q0:q1] = _ungroup_rows(row_lse.reshape(hkv, group * len_q), len_q)
    return out, lse


@_quiet_underflow
def varlen_attention_bwd(
    dout: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    lse: Any,
    cu_seqlens_q: Any,
    cu_seqlens_k: Any,
    *,
    causal: bool = False,
    scale: Optional[float] = None,
    window: Tuple[int, int] = (-1, -1),
    softcap: float = 0.0,
    causal_align: str = "bottom_right",
    alibi_slopes: Any = None,
    sinks: Any = None,
    dtype: Any = np.float64,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Backward of ``varlen_attention_fwd``: gradients of ``sum(out * dout)``.

    Arguments:
        dout: [total_q, Hq, D], the gradient flowing into out.
        q: [total_q, Hq, D]; k, v: [total_k, Hkv, D]: the forward inputs.
        out: [total_q, Hq, D], the forward output.
        lse: [total_q, Hq], the forward log-sum-exp (token-major); a row whose
            lse is not finite (-inf: no visible key) contributes nothing.
        cu_seqlens_q, cu_seqlens_k, causal, scale, window, softcap,
        causal_align, alibi_slopes, sinks, dtype: exactly as in
            ``varlen_attention_fwd`` (the masks are the same; see its
            docstring for drawings).

    FlashAttention-2 formulas, per sequence and query head h (kv head
    ``h // (Hq // Hkv)``), with S0 = scale * q k^T, S = softcap * tanh(S0 /
    softcap) if softcap > 0 else S0, B the ALiBi bias (0 without slopes)::

        P     = exp(S + B - lse)    on visible entries, 0 elsewhere
        dV    = P^T dout            (summed over the query heads of a group)
        dP    = dout V^T
        delta = rowsum(dout * out)
        dS    = P * (dP - delta)
        dS0   = dS * (1 - tanh(S0 / softcap)^2)  if softcap > 0 else dS
        dQ    = scale * dS0 K
        dK    = scale * dS0^T Q     (summed over the query heads of a group)
        dsink = -sum_i exp(sink - lse_i) * delta_i   (over every row i of head h)

    The sink has no value, so it leaves dS's form unchanged; lse, which holds
    its term, is all the other gradients need of it. The bias depends on no
    input, so it only enters through P.

    Returns:
        dq: [total_q, Hq, D], dk: [total_k, Hkv, D], dv: [total_k, Hkv, D],
        dsinks: [Hq], all of dtype.  Keys no query sees get dk = dv = 0; rows
        with no visible key get dq = 0. Without sinks, dsinks is 0 (an absent
        sink is one at -inf, whose share of every row is 0).
    """
    dt, q, k, v, cu_q, cu_k, group, left, right, cap, sc, slopes, sink = _check_varlen_common(
        q, k, v, cu_seqlens_q, cu_seqlens_k, causal, scale, window, softcap, causal_align, alibi_slopes, sinks, dtype
    )
    total_q, hq, d = q.shape
    total_k, hkv, _ = k.shape
    dout, out, lse = check_varlen_grad_inputs(dout, out, lse, q.shape)
    dout = dout.astype(dt, copy=False)
    out = out.astype(dt, copy=False)
    lse = lse.astype(dt, copy=False)
    neg_inf = dt.type(-np.inf)
    zero = dt.type(0.0)
    one = dt.type(1.0)
    dq = np.zeros((total_q, hq, d), dtype=dt)
    dk = np.zeros((total_k, hkv, d), dtype=dt)
    dv = np.zeros((total_k, hkv, d), dtype=dt)
    for q0, q1, k0, k1, mask in visible_sequences(cu_q, cu_k, causal_align, left, right):
        len_q, len_k = mask.shape
        qg = _group_rows(q[q0:q1], hkv, group)  # [Hkv, R, D], R = G*Lq
        dog = _group_rows(dout[q0:q1], hkv, group)
        og = _group_rows(out[q0:q1], hkv, group)
        lg = _group_rows(lse[q0:q1].reshape(len_q, hq, 1), hkv, group)  # [Hkv, R, 1]
        kg = k[k0:k1].transpose(1, 0, 2)  # [Hkv, Lk, D]
        vg = v[k0:k1].transpose(1, 0, 2)
        s, t = _capped_scores(qg, kg, sc, cap, dt)  # [Hkv, R, Lk]
        s = _alibi(s.reshape(hkv, group, len_q, len_k), slopes, len_q, len_k, causal_align, dt)
        s = s.reshape(hkv, group * len_q, len_k)
        row_ok = np.isfinite(lg)
        safe_lse = np.where(row_ok, lg, zero)
        full_mask = np.tile(mask, (group, 1)).reshape(1, group * len_q, len_k)
        p = np.exp(np.where(full_mask & row_ok, s - safe_lse, neg_inf))
        dv[k0:k1] = np.matmul(p.transpose(0, 2, 1), dog).transpose(1, 0, 2)
        dp = np.matmul(dog, vg.transpose(0, 2, 1))
        delta = np.sum(dog * og, axis=-1, keepdims=True)
        ds = p * (dp - delta)
        if t is not None:
            ds = ds * (one - t * t)
        dq[q0:q1] = _ungroup_rows(np.matmul(ds, kg) * sc, len_q)
        dk[k0:k1] = (np.matmul(ds.transpose(0, 2, 1), qg) * sc).transpose(1, 0, 2)
    dsinks = np.zeros(hq, dtype=dt)
    if sink is not None:
        finite = np.isfinite(lse)
        share = np.exp(np.where(finite, sink[None, :] - np.where(finite, lse, zero), neg_inf))  # the sink's p
        dsinks = -np.sum(share * np.sum(dout * out, axis=-1), axis=0).astype(dt, copy=False)
    return dq, dk, dv, dsinks


@_quiet_underflow
def attention_probs(
    q: Any,
    k_hist: Any,
    *,
    pos: int,
    window: int = 0,
    scale: Optional[float] = 1.0,
    dtype: Any = np.float64,
) -> np.ndarray:
    """Softmax probabilities of one decoding step over a key history.

    Arguments:
        q: [Hq, D], the current token's query heads.
        k_hist: [history_len, Hkv, D], the key cache (the sequence is the slow
            axis); any history_len >= 1.  Hq must be a multiple of Hkv; query
            head h reads key head ``h // (Hq // Hkv)``.
        pos: position of the current token, 0 <= pos < history_len; keys after
            pos are never visible.
        window: number of visible keys *including the current one*; 0 means
            unbounded.  earliest = pos + 1 - window if window != 0 and
            pos + 1 >= window, else 0.  Keys earliest <= t <= pos are visible.
        scale: scores are ``scale * dot(q[h], k_hist[t, kv(h)])``.  Default 1.0
            (un-scaled, Gemma style); None means 1 / sqrt(D).
        dtype: np.float64 (default) or np.float32 compute dtype.

    Returns:
        probs: [Hq, history_len] of dtype; each row sums to 1 over the visible
            keys and is exactly 0 on every invisible key.  Key pos is always
            visible, so no row is empty.

    Visible keys (1), history_len=8::

        visible: history_len=8 pos=5 window=3
        t     0  1  2  3  4  5  6  7
        vis   .  .  .  1  1  1  .  .

        visible: history_len=8 pos=1 window=3
        t     0  1  2  3  4  5  6  7
        vis   1  1  .  .  .  .  .  .

        visible: history_len=8 pos=6 window=0
        t     0  1  2  3  4  5  6  7
        vis   1  1  1  1  1  1  1  .
    """
    dt = _check_dtype(dtype)
    q, k_hist, pos, window, group = check_probs_inputs(q, k_hist, pos, window)
    hq, d = q.shape
    history_len, hkv, _ = k_hist.shape
    sc = _check_scale(scale, d, dt)
    earliest = history_start(pos, window)
    n = pos + 1 - earliest
    qg = q.astype(dt, copy=False).reshape(hkv, group, d)
    kg = k_hist[earliest : pos + 1].astype(dt, copy=False).transpose(1, 2, 0)  # [Hkv, D, n]
    s = (np.matmul(qg, kg) * sc).astype(dt, copy=False)  # [Hkv, G, n]
    p, _ = masked_softmax(s, np.ones((1, 1, n), dtype=bool), dt)
    probs = np.zeros((hq, history_len), dtype=dt)
    probs[:, earliest : pos + 1] = p.reshape(hq, n)
    return probs


@_quiet_underflow
def attention_probs_batched(
    q: Any,
    k_hist: Any,
    positions: Any,
    *,
    window: int = 0,
    scale: Optional[float] = 1.0,
    dtype: Any = np.float64,
) -> np.ndarray:
    """Softmax probabilities of many query positions over one key history.

    ``attention_probs`` once per query position, stacked: what a training
    backward that rebuilds the probabilities of every position needs.

    Arguments:
        q: [n_pos, Hq, D], the query heads of each position.
        k_hist: [history_len, Hkv, D], the key cache (the sequence is the slow
            axis); any history_len >= 1.  Hq must be a multiple of Hkv; query
            head h reads key head ``h // (Hq // Hkv)``.
        positions: [n_pos] integers, the position of each query row, each in
            [0, history_len); any order, repeats allowed (n_pos may be 0).
        window: number of visible keys *including the current one*; 0 means
            unbounded, exactly as in ``attention_probs``.  Keys
            earliest(p) <= t <= p are visible to a query at position p, with
            earliest(p) = p + 1 - window if window != 0 and p + 1 >= window,
            else 0.
        scale: scores are ``scale * dot(q[i, h], k_hist[t, kv(h)])``.  Default
            1.0 (un-scaled, Gemma style); None means 1 / sqrt(D).
        dtype: np.float64 (default) or np.float32 compute dtype.

    Returns:
        probs: [n_pos, Hq, history_len] of dtype, with
            ``probs[i] == attention_probs(q[i], k_hist, pos=positions[i],
            window=window, scale=scale, dtype=dtype)``: each row sums to 1
            over its visible keys and is exactly 0 on every invisible key.

    Visible keys (1) of three positions, history_len=8, window=3::

        visible: history_len=8 pos=5 window=3
        t     0  1  2  3  4  5  6  7
        vis   .  .  .  1  1  1  .  .

        visible: history_len=8 pos=1 window=3
        t     0  1  2  3  4  5  6  7
        vis   1  1  .  .  .  .  .  .

        visible: history_len=8 pos=7 window=3
        t     0  1  2  3  4  5  6  7
        vis   .  .  .  .  .  1  1  1
    """
    dt = _check_dtype(dtype)
    q, k_hist, pos, window, _ = check_probs_batched_inputs(q, k_hist, positions, window)
    n_pos, hq, d = q.shape
    history_len = k_hist.shape[0]
    pos_list = [int(p) for p in pos.tolist()]
    _check_scale(scale, d, dt)
    probs = np.zeros((n_pos, hq, history_len), dtype=dt)
    for i, p in enumerate(pos_list):
        probs[i] = attention_probs(q[i], k_hist, pos=p, window=window, scale=scale, dtype=dt)
    return probs


@_quiet_underflow
def sdpa(
    q: Any,
    k: Any,
    v: Any,
    *,
    mask: Any = None,
    causal: bool = False,
    window: Optional[Tuple[int, int]] = None,
    scale: Optional[float] = None,
    layout: str = "bhsd",
    dtype: Any = np.float64,
) -> np.ndarray:
    """PyTorch-shaped scaled dot-product attention on padded tensors.

    Arguments:
        q: layout "bhsd": [B, H, Sq, D]; layout "bshd": [B, Sq, H, D].
        k, v: layout "bhsd": [B, Hkv, Sk, D]; "bshd": [B, Sk, Hkv, D].  H must
            be a multiple of Hkv; query head h reads k/v head ``h // (H // Hkv)``.
        mask: None or a boolean array (True = attend) broadcastable to
            [B, H, Sq, Sk] whatever the layout.  Non-boolean masks are refused.
        causal: top-left aligned like PyTorch's is_causal: key j is visible
            to query i when j <= i.
        window: None or (left, right), inclusive, -1 = unbounded, top-left
            aligned: i - left <= j <= i + right.  Intersected with causal.
        scale: score scale; None means 1 / sqrt(D).
        layout: "bhsd" or "bshd".
        dtype: np.float64 (default) or np.float32 compute dtype.

    A key must pass every mask (mask, causal, window) to be visible.  A query
    row with no visible key gives an output of exactly 0 (PyTorch gives NaN).

    Returns:
        out: q's layout and shape, of dtype.

    Masks (1 = visible), causal=True, and window=(2, 0), which is the original
    sdpa_arena kernel's sliding window 2 (keys row-2 .. row; adding causal=True changes nothing)::

        mask: len_q=3 len_k=5 causal=True window=(-1, -1) align=top_left
             k0 k1 k2 k3 k4
        q0    1  .  .  .  .
        q1    1  1  .  .  .
        q2    1  1  1  .  .

        mask: len_q=5 len_k=5 causal=False window=(2, 0) align=top_left
             k0 k1 k2 k3 k4
        q0    1  .  .  .  .
        q1    1  1  .  .  .
        q2    1  1  1  .  .
        q3    .  1  1  1  .
        q4    .  .  1  1  1
    """
    dt = _check_dtype(dtype)
    q, k, v, m, group = check_sdpa_inputs(q, k, v, mask, layout)
    bsz, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    causal = check_bool(causal, "causal")
    if window is None:
        left, right = -1, -1
    else:
        left, right = check_window_pair(window, "window")
    right = effective_right(causal, right)
    sc = _check_scale(scale, d, dt)
    visible = band_mask(sq, sk, 0, left, right).reshape(1, 1, sq, sk)
    if m is not None:
        visible = visible & m
    visible = np.broadcast_to(visible, (bsz, hq, sq, sk)).reshape(bsz, hkv, group, sq, sk)
    qg = q.astype(dt, copy=False).reshape(bsz, hkv, group * sq, d)
    kt = k.astype(dt, copy=False).transpose(0, 1, 3, 2)  # [B, Hkv, D, Sk]
    vg = v.astype(dt, copy=False)
    s = (np.matmul(qg, kt) * sc).astype(dt, copy=False).reshape(bsz, hkv, group, sq, sk)
    p, _ = masked_softmax(s, visible, dt)
    out = np.matmul(p.reshape(bsz, hkv, group * sq, sk), vg).reshape(bsz, hq, sq, d)
    out = out.astype(dt, copy=False)
    if layout == "bshd":
        out = np.ascontiguousarray(out.transpose(0, 2, 1, 3))
    return out


# ---------------------------------------------------------------------------
# decode attention over a paged KV cache
# ---------------------------------------------------------------------------

# The float64 reference takes the scores of one kv head in row chunks of at most this many
# (rows x keys): a chunked prefill of 2048 new tokens over a 32k-token cache would otherwise hold
# gigabytes of them. Each row's softmax is its own, so the chunks change nothing in the result.
_CHUNK_SCORES = 1 << 22
# A float parameter (ALiBi slope, sink logit) must be finite and representable in float32: the
# kernels hold it as an f32.
_F32_MAX = float(np.finfo(np.float32).max)
_I32_MIN, _I32_MAX = -(2**31), 2**31 - 1


class DecodeArgs(NamedTuple):
    """The validated arguments of ``decode_attention`` (``check_decode_args``)."""

    q: np.ndarray  # [B, Sq_new, Hq, D], float16/32/64, Sq_new >= 1
    k_cache: np.ndarray  # [num_blocks, block_size, Hkv, D]
    v_cache: np.ndarray  # k_cache's shape
    block_table: np.ndarray  # [B, max_blocks] int64, every entry within int32
    seq_lens: Tuple[int, ...]  # per sequence: 0 (an idle slot) or in [Sq_new, max_blocks * block_size]
    scale: float  # None resolved to 1 / sqrt(D)
    window_left: int  # -1 unbounded
    softcap: float  # 0 off
    alibi_slopes: Optional[np.ndarray]  # [Hq] float64, or None
    sinks: Optional[np.ndarray]  # [Hq] float64, or None


def _int_array(x: Any, name: str, ndim: int, shape_doc: str) -> np.ndarray:
    """``x`` as an int64 ndarray with ``ndim`` dimensions whose entries all fit in int32."""
    a = np.asarray(x)
    if a.ndim != ndim:
        raise ValueError("%s must be %d-D with shape %s, got shape %s" % (name, ndim, shape_doc, tuple(a.shape)))
    if a.dtype.kind not in "iu" and not (a.size == 0 and a.dtype.kind == "f"):
        raise ValueError("%s must be an integer (int32) array, got dtype %s" % (name, a.dtype))
    a = a.astype(np.int64)
    if a.size and (int(a.min()) < _I32_MIN or int(a.max()) > _I32_MAX):
        raise ValueError("%s must hold int32 values, got an entry outside [%d, %d]" % (name, _I32_MIN, _I32_MAX))
    return a


def _head_params(x: Any, name: str, hq: int) -> Optional[np.ndarray]:
    """None, or one finite float32-representable value per query head as float64 [Hq]."""
    if x is None:
        return None
    a = _float_array(x, name, 1, "[Hq] (one value per query head)")
    if a.shape[0] != hq:
        raise ValueError("%s must have one value per query head, shape [Hq] = (%d,), got shape %s" % (name, hq, tuple(a.shape)))
    a = a.astype(np.float64)
    bad = ~(np.isfinite(a) & (np.abs(a) <= _F32_MAX))
    if bad.any():
        h = int(np.argmax(bad))
        raise ValueError("%s[%d] must be finite and representable in float32 (|x| <= %.4g), got %r" % (name, h, _F32_MAX, a[h]))
    return a


def check_decode_args(
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
) -> DecodeArgs:
    """The one check of ``decode_attention``'s arguments: every entry point of decode attention
    calls it, so each refuses the same values with the same message. A block of the cache that a
    sequence uses is checked here, before anything reads it."""
    q = _float_array(q, "q", 4, "[B, Sq_new, Hq, D]")
    k_cache = _float_array(k_cache, "k_cache", 4, "[num_blocks, block_size, Hkv, D]")
    v_cache = _float_array(v_cache, "v_cache", 4, "[num_blocks, block_size, Hkv, D]")
    bsz, sq, hq, d = q.shape
    num_blocks, block_size, hkv, dk = k_cache.shape
    if d < 1:
        raise ValueError("q head dim D must be >= 1, got shape %s" % (tuple(q.shape),))
    if sq < 1:
        raise ValueError(
            "q must hold at least one new token per sequence (Sq_new = q.shape[1]), got shape %s" % (tuple(q.shape),)
        )
    if num_blocks < 1 or block_size < 1:
        raise ValueError(
            "k_cache must hold at least one block of at least one token [num_blocks, block_size, Hkv, D], got shape %s"
            % (tuple(k_cache.shape),)
        )
    if dk != d:
        raise ValueError("k_cache head dim must equal q head dim %d, got k_cache shape %s" % (d, tuple(k_cache.shape)))
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(
            "v_cache must have k_cache's shape %s [num_blocks, block_size, Hkv, D], got %s"
            % (tuple(k_cache.shape), tuple(v_cache.shape))
        )
    _check_gqa(hq, hkv, "q", "k_cache")
    table = _int_array(block_table, "block_table", 2, "[B, max_blocks]")
    if table.shape[0] != bsz:
        raise ValueError(
            "block_table must have one row per sequence, B = q.shape[0] = %d, got shape %s" % (bsz, tuple(table.shape))
        )
    lens = _int_array(seq_lens, "seq_lens", 1, "[B]")
    if lens.shape[0] != bsz:
        raise ValueError(
            "seq_lens must have one entry per sequence, B = q.shape[0] = %d, got shape %s" % (bsz, tuple(lens.shape))
        )
    max_blocks = table.shape[1]
    capacity = max_blocks * block_size
    lens_list = tuple(int(n) for n in lens.tolist())
    for b, n in enumerate(lens_list):
        if n != 0 and not sq <= n <= capacity:
            raise ValueError(
                "seq_lens[%d] must be 0 (an idle slot) or in [Sq_new, max_blocks * block_size] = [%d, %d]: the %d new "
                "tokens are already in the cache and the block table holds %d blocks of %d, got %d"
                % (b, sq, capacity, sq, max_blocks, block_size, n)
            )
        used = table[b, : -(-n // block_size)]
        bad = (used < 0) | (used >= num_blocks)
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                "block_table[%d, %d] = %d is out of range [0, num_blocks) = [0, %d); sequence %d (seq_lens[%d] = %d, "
                "block_size %d) uses its blocks 0 .. %d"
                % (b, i, int(used[i]), num_blocks, b, b, n, block_size, used.shape[0] - 1)
            )
    if not _is_int(window_left) or int(window_left) < -1:
        raise ValueError("window_left must be an integer >= -1 (-1 = unbounded), got %r" % (window_left,))
    return DecodeArgs(
        q=q,
        k_cache=k_cache,
        v_cache=v_cache,
        block_table=table,
        seq_lens=lens_list,
        scale=check_scale(scale, d),
        window_left=int(window_left),
        softcap=check_softcap(softcap),
        alibi_slopes=_head_params(alibi_slopes, "alibi_slopes", hq),
        sinks=_head_params(sinks, "sinks", hq),
    )


def _softmax_with_sink(s: np.ndarray, mask: np.ndarray, sink: Optional[np.ndarray], dt: np.dtype):
    """``_masked_softmax`` over the last axis with an extra logit ``sink`` (broadcast against
    ``s.shape[:-1]``, or None) in the denominator only: the softmax over [scores, sink] with the
    sink's probability dropped. Returns (p, lse); a row with no visible score and no sink gets
    p = 0 and lse = -inf."""
    neg_inf = dt.type(-np.inf)
    masked = np.where(mask, s, neg_inf).astype(dt, copy=False)
    row_max = masked.max(axis=-1) if masked.shape[-1] else np.full(masked.shape[:-1], neg_inf, dtype=dt)
    top = row_max if sink is None else np.maximum(row_max, sink)
    has = top > neg_inf
    safe_top = np.where(has, top, dt.type(0.0))[..., None]
    e = np.exp(masked - safe_top)  # exp(-inf) = 0 on masked scores
    denom = e.sum(axis=-1, keepdims=True)
    if sink is not None:
        denom = denom + np.exp(sink[..., None] - safe_top)
    safe_denom = np.where(has[..., None], denom, dt.type(1.0))
    p = (e / safe_denom).astype(dt, copy=False)
    lse = np.where(has, safe_top[..., 0] + np.log(safe_denom[..., 0]), neg_inf)
    return p, lse.astype(dt, copy=False)


@_quiet_underflow
def decode_attention(
    q: Any,
    k_cache: Any,
    v_cache: Any,
    block_table: Any,
    seq_lens: Any,
    *,
    scale: Optional[float] = None,
    window_left: int = -1,
    softcap: float = 0.0,
    alibi_slopes: Any = None,
    sinks: Any = None,
    dtype: Any = np.float64,
) -> Tuple[np.ndarray, np.ndarray]:
    """New tokens per sequence against a paged KV cache: decoding, speculative decoding and
    chunked prefill.

    The new tokens of each sequence were written at the end of its cache before the call; they
    attend to every earlier token and causally among themselves. One new token is a decoding
    step, a few verify a speculative draft, and many (up to the whole cache) are a chunk of a
    prompt being prefilled against what the cache holds already (FlashInfer's
    BatchPrefillWithPagedKVCache, FlashAttention's flash_attn_with_kvcache with Sq > 1).

    Arguments:
        q: [B, Sq_new, Hq, D] float16/32/64, the new tokens' queries, Sq_new >= 1.
        k_cache, v_cache: [num_blocks, block_size, Hkv, D], the paged cache shared by all
            sequences; Hq must be a multiple of Hkv, and query head h reads key/value head
            ``h // (Hq // Hkv)``.
        block_table: [B, max_blocks] integers (int32): token t of sequence b is in block
            ``block_table[b, t // block_size]`` at slot ``t % block_size``. The blocks a
            sequence uses (0 .. ceil(seq_lens[b] / block_size) - 1) must be in
            [0, num_blocks); the entries after them are ignored (-1, say).
        seq_lens: [B] integers (int32), the tokens in the cache per sequence, the Sq_new new
            ones included (written at its end): 0 for an idle slot of the batch, else in
            [Sq_new, max_blocks * block_size] (Sq_new: a prefill of the whole sequence).
        scale: score scale; None means 1 / sqrt(D).
        window_left: -1 (unbounded), or how many keys before its own position a query sees
            (FlashAttention's window_size[0]).
        softcap: if > 0, scores become softcap * tanh(score / softcap) (after scaling); 0 off.
        alibi_slopes: None or [Hq]: score += alibi_slopes[h] * (key_pos - query_pos), after
            softcap (FlashAttention's alibi_slopes on a causal row, vLLM's paged attention).
        sinks: None or [Hq]: a logit per query head that joins the softmax's denominator and
            nothing else (gpt-oss): softmax over [scores, sinks[h]] with the sink's share dropped.
            It is not scaled, capped or biased.
        dtype: np.float64 (default) or np.float32; every input is cast to it and every
            intermediate is kept in it.

    Query i of sequence b sits at position pos = seq_lens[b] - Sq_new + i and sees the keys j
    with ``j <= pos`` and, when window_left >= 0, ``j >= pos - window_left`` (causal,
    bottom-right aligned: the new tokens attend causally among themselves).

    Returns:
        out: [B, Sq_new, Hq, D] of dtype, ``sum_j p_j v_j`` with p the softmax above.
        lse: [B, Sq_new, Hq] of dtype, natural log of the softmax denominator, the sink's
            ``exp(sinks[h])`` included. An idle slot's rows see no key: out 0, and lse -inf
            (or sinks[h], the log of the sink's term alone).

    Keys (1) seen by the 3 new tokens of a sequence of 9, window_left=4, and by a prefill of
    5 new tokens after 2 cached ones (window_left=-1)::

        decode: seq_len=9 new=3 window_left=4
             k0 k1 k2 k3 k4 k5 k6 k7 k8
        q0    .  .  1  1  1  1  1  .  .
        q1    .  .  .  1  1  1  1  1  .
        q2    .  .  .  .  1  1  1  1  1

        decode: seq_len=7 new=5 window_left=-1
             k0 k1 k2 k3 k4 k5 k6
        q0    1  1  1  .  .  .  .
        q1    1  1  1  1  .  .  .
        q2    1  1  1  1  1  .  .
        q3    1  1  1  1  1  1  .
        q4    1  1  1  1  1  1  1
    """
    dt = _check_dtype(dtype)
    a = check_decode_args(
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
    bsz, sq, hq, d = a.q.shape
    _, block_size, hkv, _ = a.k_cache.shape
    group = hq // hkv
    sc = dt.type(a.scale)
    slopes = None if a.alibi_slopes is None else a.alibi_slopes.astype(dt).reshape(hkv, group, 1, 1)
    sink = None if a.sinks is None else a.sinks.astype(dt).reshape(hkv, group, 1)
    out = np.zeros((bsz, sq, hq, d), dtype=dt)
    lse = np.full((bsz, sq, hq), -np.inf, dtype=dt)
    for b, n in enumerate(a.seq_lens):
        if n == 0:  # an idle slot: no key; the sink alone, if any, makes the denominator
            if a.sinks is not None:
                lse[b] = a.sinks.astype(dt)[None, :]
            continue
        blocks = a.block_table[b, : -(-n // block_size)]
        keys = np.arange(n, dtype=np.int64)
        # rows (query head in the group, new token) of each kv head: [Hkv, G, Sq_new, D]
        qg = a.q[b].astype(dt, copy=False).reshape(sq, hkv, group, d).transpose(1, 2, 0, 3)
        o = np.zeros((hkv, group, sq, d), dtype=dt)
        l_ = np.zeros((hkv, group, sq), dtype=dt)
        rows = max(1, _CHUNK_SCORES // (group * n))  # new tokens per chunk of scores
        for g in range(hkv):  # one kv head at a time: a long cache gathered whole would be huge
            kg = a.k_cache[blocks, :, g, :].reshape(-1, d)[:n].astype(dt, copy=False)  # [n, D]
            vg = a.v_cache[blocks, :, g, :].reshape(-1, d)[:n].astype(dt, copy=False)
            for i0 in range(0, sq, rows):
                i1 = min(sq, i0 + rows)
                pos = np.arange(n - sq + i0, n - sq + i1, dtype=np.int64)  # these new tokens' positions
                mask = keys[None, :] <= pos[:, None]  # [rows, n]
                if a.window_left >= 0:
                    mask &= keys[None, :] >= pos[:, None] - a.window_left
                s = (np.matmul(qg[g, :, i0:i1], kg.T) * sc).astype(dt, copy=False)  # [G, rows, n]
                if a.softcap > 0.0:
                    cap = dt.type(a.softcap)
                    s = (cap * np.tanh(s / cap)).astype(dt, copy=False)
                if slopes is not None:
                    s = (s + slopes[g] * (keys[None, :] - pos[:, None]).astype(dt)).astype(dt, copy=False)
                p, l_[g, :, i0:i1] = _softmax_with_sink(s, mask, None if sink is None else sink[g], dt)
                o[g, :, i0:i1] = np.matmul(p, vg)
        out[b] = o.transpose(2, 0, 1, 3).reshape(sq, hq, d)
        lse[b] = l_.transpose(2, 0, 1).reshape(sq, hq)
    return out, lse
