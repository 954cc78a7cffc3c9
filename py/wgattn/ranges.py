"""What a kernel's float32 and float16 arithmetic can hold: the check, before a kernel runs, that
its answer on a case is the one the float64 reference gives, or a ValueError that says the range
the kernel accepts (`Interface.check_range` calls it; every entry point plans through it: the
Python API, the CLI, the server, the page).

The float64 reference computes every accepted input; a kernel computes in float32 (some of it in
float16), and the tolerance rule cannot see an overflow that the naive run in the same precision
makes too. So each bound below is derived from the arithmetic every kernel of an interface does,
in whichever order it does it, and checked on the inputs as sent:

- Scores. A kernel forms s_ij = scale * (q_i . k_j) by scaling q first or the dot product after;
  every partial sum of the dot product is at most ||q_i|| ||k_j|| (Cauchy-Schwarz), so every
  intermediate of a score is at most max(1, |scale|) * max(1, Q) * max(1, K), Q and K the largest
  row norms (over the head dimension) of q and k. An ALiBi bias adds at most |slope| times the
  longest distance. A softmax then takes exp of differences of two scores, times log2(e) where it
  uses exp2: at most 2 * 1.443 times the bound. `scores` bounds it by SAFE = 2^124 (F32_MAX / 16),
  which leaves that factor and rounding room. A softcap needs nothing more: tanh of any finite
  score / softcap is computed without overflow (shaders/lib/softcap.wgsl).
- Sums of values. out accumulates sum_j p_j v_j with every weight p_j <= 1 before it divides by
  their sum: at most (keys a row sees) * max|v|. `sums` bounds it by SAFE.
- Gradients (the backward): dP = dout . v and delta = dout . out are at most ||dout|| (||v|| +
  ||out||), dS = P (dP - delta) no more; dq and dk sum dS times k or q over at most n keys or
  rows, times the scale. `gradients` bounds max(1, |scale|) * n * max(1, ||dout||) * (max(1,
  ||v||) + max(1, ||out||)) * max(1, max|q|, max|k|) by SAFE (given the forward's lse, as the
  API's callers pass it, P = exp(s - lse) <= 1). That lse is float32, so its rounding error is
  |lse| * 2^-24: a backward's scores are bounded by RECOMPUTED = 2^24, where it reaches 1.
- Float16. A kernel that holds values in float16 names them in its manifest entry ("half": e.g.
  "4 * v", four products p * v summed in f16 with every p <= 1), each a product of an input's
  largest magnitude (or a quantity of the interface: `Interface.magnitudes`) and constants;
  `half` bounds each by F16_MAX = 65504, float16's largest finite value.

The bounds use max(1, .) so that one bound covers either order of the arithmetic; they refuse
only values far past what attention takes (the largest score they allow is ~1e37).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .bandwidth import FILL_MAX, is_device_filled
from .expr import product_terms

__all__ = ["SAFE", "RECOMPUTED", "F16_MAX", "Bound", "amax", "row_norm", "scores", "sums", "gradients", "half", "check"]

SAFE = 2.0**124
SAFE_TEXT = "2^124 (2.13e+37)"
# A backward recomputes P = exp(s - lse) from the float32 lse it is given: past |s| = 2^24 that
# lse's rounding alone exceeds 1, and P is off by more than a factor e (or overflows).
RECOMPUTED = 2.0**24
F16_MAX = 65504.0


class Bound(NamedTuple):
    """One quantity of a kernel's arithmetic, its value on a case and its limit."""

    what: str  # in words, e.g. "the scores"
    formula: str  # how it is bounded, e.g. "max(1, |scale|) * max(1, Q) * max(1, K)"
    value: float
    limit: float
    why: str  # what would overflow past the limit
    accepts: str  # the range accepted with the rest of the case as it is ("" when none helps)


def _filled(a: np.ndarray) -> Optional[float]:
    """The largest magnitude of a GPU-filled input (wgattn.bandwidth), None for any other."""
    return FILL_MAX if is_device_filled(a) else None


def amax(x: Any) -> float:
    """The largest magnitude of `x` (0 when empty; the fill's bound for a GPU-filled input)."""
    a = np.asarray(x)
    filled = _filled(a)
    if filled is not None:
        return filled
    return float(np.max(np.abs(a), initial=0.0)) if a.size else 0.0


def row_norm(x: Any) -> float:
    """The largest Euclidean norm over the last axis (a head row), float64."""
    a = np.asarray(x)
    filled = _filled(a)
    if filled is not None:
        return filled * math.sqrt(a.shape[-1])
    if not a.size:
        return 0.0
    return float(np.sqrt(np.max(np.sum(np.square(a.astype(np.float64)), axis=-1))))


def _one(x: float) -> float:
    return max(1.0, x)


def scores(scale: float, q: Any, k: Any, slope: float = 0.0, distance: int = 0, limit: float = SAFE, why: str = "") -> Bound:
    """The scores' bound: max(1, |scale|) * max(1, Q) * max(1, K) (+ |slope| * distance with ALiBi),
    by `limit` (SAFE: exp's arguments stay finite; RECOMPUTED for a backward, `why` says why)."""
    qn, kn = row_norm(q), row_norm(k)
    body = _one(abs(scale)) * _one(qn) * _one(kn)
    bias = abs(slope) * distance
    formula = "max(1, |scale|) * max(1, max ||q_i||) * max(1, max ||k_j||)"
    if bias:
        formula += f" + max|alibi_slopes| * {distance} (the longest distance)"
    room = limit - bias
    accepts = []
    if room > 0 and _one(qn) * _one(kn) <= room:
        accepts.append(f"|scale| <= {room / (_one(qn) * _one(kn)):.4g} with these q and k")
    if distance and body < limit:
        accepts.append(f"|alibi_slopes| <= {(limit - body) / distance:.4g} with these q, k and lengths")
    return Bound(
        "the scores",
        formula,
        body + bias,
        limit,
        why or "a float32 score, or the difference of two, could overflow",
        "; ".join(accepts) or f"q and k with max ||q_i|| * max ||k_j|| <= {room:.4g} (and |scale| <= 1)",
    )


def sums(v: Any, keys: int, name: str = "v") -> Bound:
    """out's running sum: (keys a row sees) * max|v|."""
    keys = max(int(keys), 1)
    return Bound(
        f"out's running sum (up to {keys} weights <= 1 times {name})",
        f"{keys} * max|{name}|",
        keys * amax(v),
        SAFE,
        "the float32 sum of weighted values could overflow before it is divided",
        f"max|{name}| <= {SAFE / keys:.4g} at these lengths",
    )


def gradients(scale: float, q: Any, k: Any, v: Any, dout: Any, out: Any, n: int) -> Bound:
    """The backward's: max(1, |scale|) * n * max(1, ||dout||) * (max(1, ||v||) + max(1, ||out||)) * max(1, max|q|, max|k|)."""
    n = max(int(n), 1)
    others = n * (_one(row_norm(v)) + _one(row_norm(out))) * _one(max(amax(q), amax(k)))
    rest = others * _one(row_norm(dout))
    room = SAFE / (_one(abs(scale)) * others)
    return Bound(
        "the gradients",
        f"max(1, |scale|) * {n} * max(1, max ||dout_i||) * (max(1, max ||v_j||) + max(1, max ||out_i||)) "
        "* max(1, max|q|, max|k|)",
        _one(abs(scale)) * rest,
        SAFE,
        "a float32 gradient (dS summed over keys or rows, times the scale) could overflow",
        f"max ||dout_i|| <= {room:.4g} with these q, k, v and out" if room >= 1 else "",
    )


def half(expr: str, magnitudes: Mapping[str, float]) -> Bound:
    """A value a kernel holds in float16: `expr` (a product of `magnitudes` and constants) <= F16_MAX."""
    value, names, coef = 1.0, [], 1.0
    for term in product_terms(expr):
        if term[0].isdigit():
            coef *= float(term)
        elif term in magnitudes:
            names.append(term)
        else:
            raise ValueError(f"'half' names {term!r}, which this interface does not measure; it measures {sorted(magnitudes)}")
    for name in names:
        value *= magnitudes[name]
    value *= coef
    shown = " * ".join(([f"{coef:g}"] if coef != 1 else []) + [f"max|{n}|" for n in names])
    if len(names) == 1:
        accepts = f"max|{names[0]}| <= {F16_MAX / coef:.6g}"
    else:
        accepts = f"{' * '.join(f'max|{n}|' for n in names)} <= {F16_MAX / coef:.6g}"
    return Bound(f"{expr} (held in float16)", shown, value, F16_MAX, "it would become an infinity in float16", accepts)


def check(kernel: str, bounds: Sequence[Bound], alternative: Optional[str] = None) -> None:
    """ValueError for the bound that `kernel`'s arithmetic holds least (the largest value over
    its limit), saying its value, its limit, why and what range is accepted."""
    over = [b for b in bounds if not b.value <= b.limit]  # NaN fails too
    over.sort(key=lambda b: -(b.value / b.limit) if b.value == b.value else -math.inf)
    for b in over[:1]:
        limit = SAFE_TEXT if b.limit == SAFE else f"{b.limit:g}"
        accepts = f"; {kernel} accepts {b.accepts}" if b.accepts else ""
        other = f" ({alternative})" if alternative else ""
        raise ValueError(
            f"{kernel} cannot hold this case: {b.what}, bounded by {b.formula} = {b.value:.4g}, is over {limit}, "
            f"past which {b.why}{accepts}{other}"
        )
