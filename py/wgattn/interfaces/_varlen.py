"""Argument checks shared by the packed variable-length interfaces (flash_fwd, varlen_bwd):
float tensors, cu_seqlens prefix sums and the option set of wgattn.reference's varlen functions
(causal, window, softcap, scale, causal_align)."""
from __future__ import annotations

import math
import numbers
from typing import Mapping

import numpy as np

__all__ = ["CAUSAL_ALIGNS", "U32_MAX", "I32_MAX", "float3", "cu_seqlens", "options", "clip_window"]

CAUSAL_ALIGNS = ("bottom_right", "top_left")
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
    a = np.asarray(x)
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"{name} must be a 1-D integer array of length batch+1, got shape {tuple(a.shape)}")
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name} must be a 1-D integer array, got dtype {a.dtype}")
    vals = a.astype(np.int64)
    if vals[0] != 0:
        raise ValueError(f"{name} must start at 0, got {int(vals[0])}")
    steps = np.diff(vals)
    if np.any(steps < 0):
        at = int(np.argmax(steps < 0)) + 1
        raise ValueError(f"{name} must be non-decreasing, got {int(vals[at])} after {int(vals[at - 1])} "
                         f"at index {at}")
    if vals[-1] != total:
        raise ValueError(f"{name} must end at {total_name} = {total}, got {int(vals[-1])}")
    return vals.astype(np.int32)


def options(options: Mapping[str, object], head_dim: int):
    """(window_left, window_right with causal folded in, align_top_left, softcap, scale)."""
    causal = options.get("causal", False)
    if not isinstance(causal, (bool, np.bool_)):
        raise ValueError(f"causal must be True or False, got {causal!r}")
    window = options.get("window", (-1, -1))
    try:
        pair = tuple(window)
    except TypeError:
        pair = ()
    if (len(pair) != 2 or not all(isinstance(w, numbers.Integral) and not isinstance(w, (bool, np.bool_))
                                  for w in pair)):
        raise ValueError(f"window must be a pair (left, right) of integers >= -1, got {window!r}")
    left, right = int(pair[0]), int(pair[1])
    if left < -1 or right < -1:
        raise ValueError(f"window must be (left, right) with each >= -1, got ({left}, {right})")
    if causal:
        right = 0 if right == -1 else min(right, 0)
    align = options.get("causal_align", "bottom_right")
    if not isinstance(align, str) or align not in CAUSAL_ALIGNS:
        raise ValueError(f"causal_align must be 'bottom_right' or 'top_left', got {align!r}")
    softcap = options.get("softcap", 0.0)
    if (not isinstance(softcap, numbers.Real) or isinstance(softcap, (bool, np.bool_))
            or not math.isfinite(float(softcap)) or float(softcap) < 0.0):
        raise ValueError(f"softcap must be a finite real number >= 0 (0 = off), got {softcap!r}")
    scale = options.get("scale")
    if scale is None:
        scale_v = 1.0 / math.sqrt(head_dim)
    else:
        if (not isinstance(scale, numbers.Real) or isinstance(scale, (bool, np.bool_))
                or not math.isfinite(float(scale)) or float(scale) == 0.0):
            raise ValueError(f"scale must be None or a finite nonzero real number, got {scale!r}")
        scale_v = float(scale)
    return left, right, int(align == "top_left"), float(softcap), scale_v


def clip_window(left: int, right: int, total_q: int, total_k: int):
    """A bound of total_q + total_k or more excludes nothing (|i + offset - j| < total_q + total_k):
    make it -1, which keeps the kernels' i32 index arithmetic far from overflow."""
    reach = total_q + total_k
    return (-1 if left >= reach else left), (-1 if right >= reach else right)
