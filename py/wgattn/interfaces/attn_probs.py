"""The `attn_probs` interface (seed B's): softmax probabilities of one query position over a key
history, Gemma style (un-scaled scores), with GQA and a sliding window; 32 bytes of params.

    q:      [Hq, D], float32 (the current token's query heads)
    k_hist: [history_len, Hkv, D], float32 (the key cache; the sequence is the slow axis)
    probs:  [Hq, history_len]

case.options: pos (0 <= pos < history_len, the current token's position) and window (>= 0: the
number of visible keys including the current one, 0 unbounded). Query head h reads key head
h // (Hq // Hkv). The interface has no scale: scores are plain dot products.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import reference as _reference
from ..plan import Buffer, Output, Plan
from ..registry import Kernel
from . import Case

if TYPE_CHECKING:  # typing.TypeGuard is Python 3.10's: for the annotation only
    from typing import TypeGuard

    from numpy.typing import DTypeLike

__all__ = ["OUTPUTS", "plan", "reference", "case_from_reference", "conformance_cases"]

OUTPUTS = ("probs",)

_OPTIONS = ("pos", "window")
_U32_MAX = 2**32 - 1


def _is_int(x: object) -> TypeGuard[int]:  # numpy integers too: int() takes both
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))


def _float_input(x: object, name: str, ndim: int, shape_doc: str) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind != "f":
        raise ValueError(f"{name} must be a float16/32/64 array {shape_doc}, got dtype {a.dtype}")
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D {shape_doc}, got shape {a.shape}")
    return np.ascontiguousarray(a, dtype=np.float32)


def _validate(q: object, k_hist: object, pos: object, window: object) -> Tuple[np.ndarray, np.ndarray, int, int]:
    """float32 q and k_hist, and pos and window as ints; ValueError naming the bad argument."""
    q = _float_input(q, "q", 2, "[Hq, D]")
    k_hist = _float_input(k_hist, "k_hist", 3, "[history_len, Hkv, D]")
    hq, d = q.shape
    history_len, hkv, dk = k_hist.shape
    if d < 1:
        raise ValueError(f"q head dim D must be >= 1, got q shape {q.shape}")
    if dk != d:
        raise ValueError(f"k_hist head dim must equal q's head dim {d}, got k_hist shape {k_hist.shape}")
    if hq < 1:
        raise ValueError(f"q must have at least one head, got q shape {q.shape}")
    if hkv < 1:
        raise ValueError(f"k_hist must have at least one key head, got k_hist shape {k_hist.shape}")
    if hq % hkv != 0:
        raise ValueError(f"q heads ({hq}) must be a multiple of k_hist heads ({hkv}) for grouped-query attention")
    if history_len < 1:
        raise ValueError(f"k_hist must hold at least one key (history_len >= 1), got shape {k_hist.shape}")
    if not _is_int(pos) or not 0 <= int(pos) < history_len:
        raise ValueError(f"pos must be an integer in [0, history_len) = [0, {history_len}), got {pos!r}")
    if not _is_int(window) or int(window) < 0:
        raise ValueError(f"window must be an integer >= 0 (0 = unbounded), got {window!r}")
    return q, k_hist, int(pos), int(window)


def _case_args(case: Case) -> Tuple[np.ndarray, np.ndarray, int, int]:
    unknown = sorted(set(case.options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"attn_probs options are {list(_OPTIONS)}, got unknown {unknown}")
    missing = sorted({"q", "k_hist"} - set(case.inputs))
    if missing:
        raise ValueError(f"attn_probs needs inputs q and k_hist, missing {missing}")
    if "pos" not in case.options:
        raise ValueError("pos must be given (an integer in [0, history_len))")
    return _validate(case.inputs["q"], case.inputs["k_hist"], case.options["pos"], case.options.get("window", 0))


def plan(
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The dispatch plan running `kernel` (or WGSL `source` on its interface) on `case`:
    case.inputs q, k_hist; case.options pos, window."""
    q, k_hist, pos, window = _case_args(case)
    hq, d = q.shape
    history_len, hkv, _ = k_hist.shape
    values: Dict[str, int] = {
        "head_dim": d,
        "n_heads": hq,
        "n_kv_heads": hkv,
        "heads_per_kv": hq // hkv,
        "pos": pos,
        "history_len": history_len,
        # A window above pos + 1 sees every key up to pos, whatever its size: clamping to u32
        # changes nothing (pos + 1 <= history_len fits in u32).
        "window": min(window, _U32_MAX),
    }
    iface = kernel.interface
    buffers = [
        Buffer("params", iface.params_size, "uniform", iface.pack_params(values)),
        Buffer("q", q.nbytes, "storage", q.tobytes()),
        Buffer("k_hist", k_hist.nbytes, "storage", k_hist.tobytes()),
        Buffer("probs", 4 * hq * history_len, "storage", read=True),
    ]
    return Plan(
        buffers=buffers,
        dispatches=kernel.dispatches(
            values, iface.bind(b.name for b in buffers), source=source, entry_points=entry_points, overrides=overrides
        ),
        outputs=[Output("probs", "probs", 0, (hq, history_len))],
    )


def reference(case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]:
    """wgattn.reference.attention_probs with scale 1 (the interface's un-scaled scores)."""
    q, k_hist, pos, window = _case_args(case)
    return {"probs": _reference.attention_probs(q, k_hist, pos=pos, window=window, scale=1.0, dtype=dtype)}


def case_from_reference(q, k_hist, *, pos, window=0, scale=1.0, name: str = "call") -> Case:
    """The case running attention_probs(q, k_hist, pos=, window=, scale=) on this interface,
    which computes un-scaled scores: any scale other than 1 (None is 1/sqrt(D)) is refused."""
    q, k_hist, pos, window = _validate(q, k_hist, pos, window)
    d = q.shape[1]
    if _reference.check_scale(scale, d) != 1.0:  # the reference's rule first, then this interface's
        raise ValueError(
            f"scale must be 1.0 for attn_probs, whose scores are un-scaled q.k; got scale={scale!r} "
            "(pass scale=1.0, or multiply q by the scale beforehand)"
        )
    return Case(name, {"q": q, "k_hist": k_hist}, {"pos": pos, "window": window})


def _draw(
    rng: np.random.RandomState, hq: int, hkv: int, d: int, history_len: int, spread: float, offset: float
) -> Tuple[np.ndarray, np.ndarray]:
    """q and k_hist whose scores are about offset + N(0, spread^2) at any head dim: q is scaled by
    spread / sqrt(D); a nonzero offset comes from coordinate 0 (k_hist 10 there, q offset / 10)."""
    q = (rng.standard_normal((hq, d)) * (spread / np.sqrt(max(d - (offset != 0), 1)))).astype(np.float32)
    k = rng.standard_normal((history_len, hkv, d)).astype(np.float32)
    if offset:
        k[:, :, 0] = 10.0
        q[:, 0] = offset / 10.0
    return q, k


def conformance_cases(seed: int = 0) -> List[Case]:
    """Head dims 1 to 256; GQA ratios 1, 3 and all-to-one; history lengths 1, under, just over
    and many times WG, past seed B's 4096 and long (70000); pos at 0, in the middle (later keys
    get exactly 0) and at the end; window 0, 1, exactly pos + 1, above pos + 1, in between;
    scores around +100 (exp overflows float32 without the maximum subtracted) and -100 (exp
    underflows); a peaked row; all scores equal."""
    # (Hq, Hkv, D, history_len, pos, window, spread, offset)
    specs = [
        (1, 1, 1, 1, 0, 0, 1.0, 0.0),  # a single key: probability 1
        (2, 2, 1, 203, 202, 0, 1.0, 0.0),  # head dim 1, pos at the end
        (4, 4, 64, 63, 62, 0, 1.0, 0.0),  # fewer keys than WG
        (6, 2, 59, 65, 0, 0, 1.0, 0.0),  # pos 0: only key 0 visible
        (6, 2, 111, 203, 100, 0, 1.0, 0.0),  # pos in the middle, window 0
        (8, 1, 256, 203, 202, 1, 1.0, 0.0),  # window 1: only key pos
        (3, 1, 64, 65, 40, 41, 1.0, 0.0),  # window exactly pos + 1
        (4, 4, 59, 63, 30, 50, 1.0, 0.0),  # window larger than pos + 1
        (6, 2, 64, 203, 150, 37, 1.0, 0.0),  # window in between
        (3, 3, 256, 129, 128, 64, 2.0, 0.0),  # window == WG, head dim 256
        (6, 2, 64, 5000, 4999, 0, 1.0, 0.0),  # past seed B's 4096 scores
        (3, 1, 111, 5000, 4200, 4097, 1.0, 0.0),  # a window wider than 4096, in between
        (2, 1, 64, 70000, 65536, 0, 1.0, 0.0),  # long: over 1000 keys per invocation
        (6, 2, 111, 1000, 700, 0, 0.5, 100.0),  # scores ~ +100: exp(s) overflows float32
        (4, 1, 64, 300, 299, 0, 0.5, -100.0),  # scores ~ -100: exp(s) underflows float32
        (4, 2, 64, 1000, 999, 0, 8.0, 0.0),  # peaked rows
        (9, 3, 32, 300, 299, 299, 0.0, 0.0),  # all scores 0: uniform over all but key 0
    ]
    rng = np.random.RandomState(seed + 20240601)
    cases = []
    for hq, hkv, d, history_len, pos, window, spread, offset in specs:
        q, k = _draw(rng, hq, hkv, d, history_len, spread, offset)
        name = f"hq{hq}-kv{hkv}-d{d}-n{history_len}-pos{pos}-w{window}"
        if spread != 1.0:
            name += f"-sd{spread:g}"  # score spread
        if offset:
            name += f"-off{offset:+g}"  # score offset
        cases.append(case_from_reference(q, k, pos=pos, window=window, name=name))
    return cases
