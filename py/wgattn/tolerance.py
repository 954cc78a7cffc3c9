"""The tolerance rule (FlashAttention's): judge a float32 kernel against the float64 reference,
allowing a small multiple of the error that a naive float32 implementation makes on the same
inputs, plus an ulp-sized floor.

    allowance(a, b) = FACTOR * naive_err * (n32(a) + n32(b)) + FLOOR_ULPS * eps32 * max(1, max|ref|)

where n32(r) is 1 for a float32 runtime (a GPU kernel) and 0 for a float64 one (the reference in
CPython or Pyodide): two float32 runtimes may each be off by their own allowance.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

__all__ = ["FACTOR", "FLOOR_ULPS", "EXACT_RUNTIMES", "Pair", "max_abs_err", "allowance", "pair"]

FACTOR = 2.0  # FlashAttention's multiple of the naive implementation's error
FLOOR_ULPS = 4.0  # absolute floor, in float32 ulps at the output's scale
EPS32 = float(np.finfo(np.float32).eps)
EXACT_RUNTIMES = ("pyodide", "cpython")  # run the float64 reference

# One runtime comparison ("pass" is a keyword, hence the functional form).
Pair = TypedDict("Pair", {"a": str, "b": str, "max_abs_err": float, "allowance": float, "pass": bool})


def max_abs_err(a: np.ndarray, b: np.ndarray) -> float:
    """Largest |a - b|. Matching infinities (an empty row's lse = -inf) count as equal; a NaN,
    or an infinity facing anything else, is an infinite error."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"cannot compare shapes {a.shape} and {b.shape}")
    if a.size == 0:
        return 0.0
    same_inf = np.isinf(a) & (a == b)
    finite = np.isfinite(a) & np.isfinite(b)
    if not np.all(finite | same_inf):
        return float("inf")
    diff = np.where(finite, np.abs(np.where(finite, a, 0.0) - np.where(finite, b, 0.0)), 0.0)
    return float(diff.max())


def scale_of(ref: np.ndarray) -> float:
    ref = np.asarray(ref, dtype=np.float64)
    finite = ref[np.isfinite(ref)]
    return float(max(1.0, np.abs(finite).max())) if finite.size else 1.0


def allowance(naive_err: float, ref: np.ndarray, float32_sides: int = 1) -> float:
    """The allowed max abs error for a comparison with `float32_sides` float32 runtimes in it."""
    return FACTOR * naive_err * float32_sides + FLOOR_ULPS * EPS32 * scale_of(ref)


def pair(a: str, b: str, out_a: np.ndarray, out_b: np.ndarray, ref: np.ndarray, naive_err: float) -> Pair:
    """One row of a runtime comparison: {a, b, max_abs_err, allowance, pass}."""
    sides = sum(r not in EXACT_RUNTIMES for r in (a, b))
    err = max_abs_err(out_a, out_b)
    allowed = allowance(naive_err, ref, sides)
    return {"a": a, "b": b, "max_abs_err": err, "allowance": allowed, "pass": bool(err <= allowed)}
