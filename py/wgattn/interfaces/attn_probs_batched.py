"""The `attn_probs_batched` interface: softmax probabilities of many query positions over one key
history in one dispatch (what a training backward that rebuilds the probabilities needs), Gemma
style by default, with GQA, a sliding window and a score scale; 32 bytes of params.

    q:         [n_pos, Hq, D] float32 (one row of query heads per position)
    k_hist:    [history_len, Hkv, D] float32 (the key cache; the sequence is the slow axis)
    positions: [n_pos] integers, each in [0, history_len); any order, repeats allowed
    probs:     [n_pos, Hq, history_len]

case.options: window (>= 0: the number of visible keys including the current one, 0 unbounded)
and scale (a finite nonzero float; 1.0, un-scaled, by default). Query head h reads key head
h // (Hq // Hkv). Reference: wgattn.reference.attention_probs_batched.

On the GPU, q and k_hist are arrays of vec4<f32>: each head row holds ceil(D / 4) vec4s, padded
with zeros past D by the plan (zeros add nothing to a dot product), so kernels load vec4s at any D.
positions are u32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .. import reference as _reference
from ..plan import Buffer, Output, Plan
from ..registry import Kernel
from . import Case
from .attn_probs import _float_input, _is_int  # the same argument rules as seed B's interface

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["OUTPUTS", "INPUTS", "plan", "reference", "case_from_reference", "conformance_cases"]

OUTPUTS = ("probs",)
INPUTS = ("q", "k_hist", "positions")

_OPTIONS = ("window", "scale")
_U32_MAX = 2**32 - 1
_I32_MAX = 2**31 - 1


def _validate(
    q: object, k_hist: object, positions: object, window: object, scale: object
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    """float32 q and k_hist, int64 positions, window as an int and scale as a float; ValueError
    naming the bad argument and what is allowed."""
    q = _float_input(q, "q", 3, "[n_pos, Hq, D]")
    k_hist = _float_input(k_hist, "k_hist", 3, "[history_len, Hkv, D]")
    n_pos, hq, d = q.shape
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
    pos = np.asarray(positions)
    if pos.ndim != 1:
        raise ValueError(f"positions must be a 1-D integer array of length n_pos = {n_pos}, got shape {pos.shape}")
    if pos.dtype.kind not in "iu" and not (pos.size == 0 and pos.dtype.kind == "f"):
        raise ValueError(f"positions must be a 1-D integer array, got dtype {pos.dtype}")
    if pos.shape[0] != n_pos:
        raise ValueError(
            f"positions must have one entry per query row: length n_pos = q.shape[0] = {n_pos}, got length {pos.shape[0]}"
        )
    pos = pos.astype(np.int64)
    bad = np.flatnonzero((pos < 0) | (pos >= history_len))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"positions[{i}] must be in [0, history_len) = [0, {history_len}), got {int(pos[i])}")
    if not _is_int(window) or int(window) < 0:
        raise ValueError(f"window must be an integer >= 0 (0 = unbounded), got {window!r}")
    scale = _reference.check_scale(scale, d)  # the reference's rule: a normal float32 magnitude
    if history_len > _I32_MAX:
        raise ValueError(f"history_len must fit in i32 (positions travel as int32), got {history_len}")
    if n_pos * hq * history_len > _U32_MAX or max(n_pos * hq, history_len * hkv) * (-(-d // 4)) > _U32_MAX:
        raise ValueError(
            f"q ({q.shape}), k_hist ({k_hist.shape}) or probs ([{n_pos}, {hq}, {history_len}]) "
            "is too large: element indices must fit in u32"
        )
    return q, k_hist, pos, int(window), float(scale)


def _case_args(case: Case) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    unknown = sorted(set(case.options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"attn_probs_batched options are {list(_OPTIONS)}, got unknown {unknown}")
    missing = [name for name in INPUTS if case.inputs.get(name) is None]
    if missing:
        raise ValueError(f"attn_probs_batched needs inputs {list(INPUTS)}, missing {missing}")
    return _validate(
        case.inputs["q"],
        case.inputs["k_hist"],
        case.inputs["positions"],
        case.options.get("window", 0),
        case.options.get("scale", 1.0),
    )


def _vec4_rows(a: np.ndarray) -> np.ndarray:
    """[..., D] float32 -> [..., ceil(D / 4) * 4], zero-padded (the kernels' vec4 rows)."""
    d = a.shape[-1]
    pad = -d % 4
    if pad == 0:
        return a
    out = np.zeros(a.shape[:-1] + (d + pad,), dtype=np.float32)
    out[..., :d] = a
    return out


def plan(
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The dispatch plan running `kernel` (or WGSL `source` on its interface) on `case`:
    case.inputs q, k_hist, positions; case.options window, scale."""
    q, k_hist, pos, window, scale = _case_args(case)
    n_pos, hq, d = q.shape
    history_len, hkv, _ = k_hist.shape
    values: Dict[str, float] = {
        "head_dim": d,
        "n_heads": hq,
        "n_kv_heads": hkv,
        "heads_per_kv": hq // hkv,
        "n_pos": n_pos,
        "history_len": history_len,
        # A window above p + 1 sees every key up to p, whatever its size: clamping to u32 changes
        # nothing (p + 1 <= history_len fits in u32).
        "window": min(window, _U32_MAX),
        "scale": scale,
    }
    q4 = _vec4_rows(q)
    k4 = _vec4_rows(k_hist)
    pos32 = pos.astype(np.uint32)
    iface = kernel.interface
    buffers = [
        Buffer("params", iface.params_size, "uniform", iface.pack_params(values)),
        Buffer("q", q4.nbytes, "storage", q4.tobytes()),
        Buffer("k_hist", k4.nbytes, "storage", k4.tobytes()),
        Buffer("positions", pos32.nbytes, "storage", pos32.tobytes()),
        Buffer("probs", 4 * n_pos * hq * history_len, "storage", read=True),
    ]
    return Plan(
        buffers=buffers,
        dispatches=kernel.dispatches(
            values, iface.bind(b.name for b in buffers), source=source, entry_points=entry_points, overrides=overrides
        ),
        outputs=[Output("probs", "probs", 0, (n_pos, hq, history_len))],
    )


def reference(case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]:
    """wgattn.reference.attention_probs_batched on the case (dtype float32: the naive float32 run)."""
    q, k_hist, pos, window, scale = _case_args(case)
    return {"probs": _reference.attention_probs_batched(q, k_hist, pos, window=window, scale=scale, dtype=dtype)}


def case_from_reference(q, k_hist, positions, *, window=0, scale=1.0, name: str = "call") -> Case:
    """The case running attention_probs_batched(q, k_hist, positions, window=, scale=) on this
    interface (ValueError naming a bad argument). scale None is 1/sqrt(D), as in the reference;
    the case carries it as a float."""
    q, k_hist, pos, window, scale = _validate(q, k_hist, positions, window, scale)
    return Case(name, {"q": q, "k_hist": k_hist, "positions": pos.astype(np.int32)}, {"window": window, "scale": scale})


# ---------------------------------------------------------------------------
# the conformance grid
# ---------------------------------------------------------------------------


def _draw(
    rng: np.random.RandomState, n_pos: int, hq: int, hkv: int, d: int, history_len: int, spread: float, offset: float
) -> Tuple[np.ndarray, np.ndarray]:
    """q and k_hist whose scores are about offset + N(0, spread^2) at any head dim: q is scaled by
    spread / sqrt(D); a nonzero offset comes from coordinate 0 (k_hist 10 there, q offset / 10)."""
    q = (rng.standard_normal((n_pos, hq, d)) * (spread / np.sqrt(max(d - (offset != 0), 1)))).astype(np.float32)
    k = rng.standard_normal((history_len, hkv, d)).astype(np.float32)
    if offset:
        k[:, :, 0] = 10.0
        q[:, :, 0] = offset / 10.0
    return q, k


def _positions(rng: np.random.RandomState, kind: str, n_pos: int, history_len: int) -> np.ndarray:
    """`kind`: "tail" (the last n_pos positions, in order: the backward's and the benchmark's job),
    "edges" (0, history_len - 1 and random ones between, shuffled, with repeats), "random" (any
    order, repeats allowed), "same" (one position repeated)."""
    last = history_len - 1
    if kind == "tail":
        return np.arange(history_len - n_pos, history_len)
    if kind == "same":
        return np.full(n_pos, last // 2)
    if kind == "edges":
        base = [0, last, 0, last] + list(rng.randint(0, history_len, size=max(n_pos - 4, 0)))
        p = np.array(base[:n_pos])
        rng.shuffle(p)
        return p
    return rng.randint(0, history_len, size=n_pos)


# (n_pos, Hq, Hkv, D, history_len, positions kind, window, scale, spread, offset)
_SPECS = [
    (1, 1, 1, 1, 1, "tail", 0, 1.0, 1.0, 0.0),  # a single key: probability 1
    (5, 2, 2, 1, 5, "random", 0, 1.0, 1.0, 0.0),  # head dim 1, 5 keys, repeats likely
    (9, 4, 1, 7, 63, "edges", 0, 1.0, 1.0, 0.0),  # head dim 7 (padded to 8), MQA
    (7, 4, 2, 64, 64, "edges", 1, 1.0, 1.0, 0.0),  # window 1: only key p
    (6, 8, 2, 128, 65, "random", 5, 0.125, 1.0, 0.0),  # small window, GQA 4, scaled
    (4, 2, 2, 256, 65, "edges", 100, 1.0, 1.0, 0.0),  # window larger than every p + 1, d 256
    (11, 6, 3, 64, 203, "tail", 0, 1.0, 1.0, 0.0),  # GQA 2, n_pos * group not a multiple of 4
    (8, 3, 3, 64, 130, "same", 0, 1.0, 1.0, 0.0),  # one position repeated
    (5, 4, 4, 64, 300, "random", 37, 1.0, 1.0, 0.0),  # window in between, any order
    (3, 2, 1, 59, 300, "edges", 300, 1.0, 1.0, 0.0),  # window == history_len: unbounded at p = last
    (16, 4, 4, 64, 4096, "tail", 0, 1.0, 1.0, 0.0),  # the benchmark's job, smaller
    (6, 4, 1, 128, 5000, "random", 4097, 1.0, 1.0, 0.0),  # past seed B's 4096; window > 4096
    (4, 2, 2, 64, 20000, "edges", 0, 1.0, 1.0, 0.0),  # long: over 16384 keys
    (6, 4, 2, 111, 1000, "random", 0, 1.0, 0.5, 100.0),  # scores ~ +100: exp(s) overflows float32
    (4, 4, 1, 64, 300, "tail", 0, 1.0, 0.5, -100.0),  # scores ~ -100: exp(s) underflows float32
    (6, 4, 2, 64, 1000, "random", 0, 1.0, 100.0, 0.0),  # peaked rows: scores of magnitude ~100
    (4, 2, 1, 64, 500, "random", 0, -0.5, 4.0, 0.0),  # a negative scale
    (5, 2, 2, 32, 200, "tail", 0, 1.0, 0.0, 0.0),  # all scores 0: uniform over the visible keys
]


def conformance_cases(seed: int = 0) -> List[Case]:
    """History lengths 1, 5, 63, 64, 65, 4096, 5000 and 20000 (> 16384); head dims 1, 7, 32, 59,
    64, 111, 128 and 256; GQA ratios 1, 2, 3 (6 heads on 2), 4 and MQA; windows 0, 1, small, in
    between, wider than 4096 and larger than every p + 1; positions at 0 and at history_len - 1,
    in any order, repeated, one position for every row; a scale of 1/8 and a negative one; scores
    around +100 and -100, peaked rows (scores of magnitude ~100) and all-equal scores."""
    rng = np.random.RandomState(seed + 20240611)
    cases = []
    for n_pos, hq, hkv, d, history_len, kind, window, scale, spread, offset in _SPECS:
        q, k = _draw(rng, n_pos, hq, hkv, d, history_len, spread, offset)
        pos = _positions(rng, kind, n_pos, history_len)
        name = f"np{n_pos}-hq{hq}-kv{hkv}-d{d}-n{history_len}-{kind}-w{window}"
        if scale != 1.0:
            name += f"-sc{scale:g}"
        if spread != 1.0:
            name += f"-sd{spread:g}"  # score spread
        if offset:
            name += f"-off{offset:+g}"  # score offset
        cases.append(case_from_reference(q, k, pos, window=window, scale=scale, name=name))
    return cases
