"""The `varlen_fwd` interface (seed A's): packed variable-length attention forward with LSE.

    q:            [total_q, H, D] float32, the queries of every sequence packed along axis 0
    k, v:         [total_k, H, D] float32 (as many heads as q: the interface has no GQA)
    cu_seqlens_q: [batch + 1] int32 prefix sums: sequence b owns rows cu_seqlens_q[b] : [b + 1]
    cu_seqlens_k: [batch + 1] int32, the same for k and v
    out:          [total_q, H, D]
    lse:          [total_q, H] (token-major), natural log of the softmax denominator

Options: `causal` (bool; top-left, seed A's: query position i sees key positions j <= i of its
sequence) and `scale` (None: 1/sqrt(D)). A row with no visible key (a sequence without keys)
gives out 0 and lse -inf. The reference is wgattn.reference.varlen_attention_fwd with
causal_align="top_left".
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .. import reference as _reference
from ..plan import Buffer, Output, Plan
from ..registry import Kernel
from . import Case
from ._varlen import cu_seqlens

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["OUTPUTS", "plan", "reference", "case_from_reference", "conformance_cases"]

OUTPUTS = ("out", "lse")
INPUTS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")
OPTIONS = ("causal", "scale")
_I32_MAX = 2**31 - 1


def _float_tensor(x, name: str, shape_doc: str) -> np.ndarray:
    a = np.asarray(x)
    if a.ndim != 3:
        raise ValueError(f"{name} must be 3-D {shape_doc}, got shape {tuple(a.shape)}")
    if a.dtype.kind != "f":
        raise ValueError(f"{name} must be float16/32/64, got dtype {a.dtype}")
    return a


def _check(case: Case) -> Tuple[Dict[str, np.ndarray], bool, float]:
    """Validated inputs (q, k, v as float32; cu_seqlens as int32), causal and the scale."""
    missing = [n for n in INPUTS if n not in case.inputs]
    if missing:
        raise ValueError(f"case {case.name!r}: varlen_fwd needs inputs {list(INPUTS)}, missing {missing}")
    unknown = sorted(set(case.inputs) - set(INPUTS))
    if unknown:
        raise ValueError(f"case {case.name!r}: unknown inputs {unknown}; varlen_fwd takes {list(INPUTS)}")
    unknown = sorted(set(case.options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"case {case.name!r}: unknown options {unknown}; varlen_fwd takes {list(OPTIONS)}")
    q = _float_tensor(case.inputs["q"], "q", "[total_q, H, D]")
    k = _float_tensor(case.inputs["k"], "k", "[total_k, H, D]")
    v = _float_tensor(case.inputs["v"], "v", "[total_k, H, D]")
    total_q, heads, dim = q.shape
    total_k, heads_k, dim_k = k.shape
    if dim < 1:
        raise ValueError(f"q head_dim D must be >= 1, got q shape {tuple(q.shape)}")
    if heads < 1:
        raise ValueError(f"q must have at least 1 head, got q shape {tuple(q.shape)}")
    if dim_k != dim:
        raise ValueError(f"k head_dim must equal q's ({dim}), got k shape {tuple(k.shape)}")
    if heads_k != heads:
        raise ValueError(
            f"k has {heads_k} heads but q has {heads}: varlen_fwd has no grouped-query "
            f"attention (GQA), so k/v heads must equal q heads"
        )
    if tuple(v.shape) != tuple(k.shape):
        raise ValueError(f"v must have k's shape {tuple(k.shape)} [total_k, H, D], got {tuple(v.shape)}")
    if max(total_q, total_k) > _I32_MAX:
        raise ValueError(f"total_q and total_k must fit in i32, got {total_q} and {total_k}")
    cu_q = cu_seqlens(case.inputs["cu_seqlens_q"], "cu_seqlens_q", total_q, "total_q (q.shape[0])")
    cu_k = cu_seqlens(case.inputs["cu_seqlens_k"], "cu_seqlens_k", total_k, "total_k (k.shape[0])")
    if cu_q.shape != cu_k.shape:
        raise ValueError(
            f"cu_seqlens_q and cu_seqlens_k must have the same length (batch + 1), got {cu_q.shape[0]} and {cu_k.shape[0]}"
        )
    causal = _reference.check_bool(case.options.get("causal", False), "causal")
    scale = _reference.check_scale(case.options.get("scale"), dim)
    arrays = {
        "q": np.ascontiguousarray(q, dtype=np.float32),
        "k": np.ascontiguousarray(k, dtype=np.float32),
        "v": np.ascontiguousarray(v, dtype=np.float32),
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
    }
    return arrays, causal, scale


def plan(
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The dispatch plan running `kernel` (or WGSL `source` on its interface) on `case`."""
    arrays, causal, scale = _check(case)
    total_q, heads, dim = arrays["q"].shape
    total_k = arrays["k"].shape[0]
    values: Dict[str, float] = {
        "total_tokens_q": total_q,
        "total_tokens_k": total_k,
        "num_heads": heads,
        "head_dim": dim,
        "batch_size": arrays["cu_seqlens_q"].shape[0] - 1,
        "causal": int(causal),
        "scale": scale,
    }
    iface = kernel.interface
    buffers = [Buffer(name, arr.nbytes, "storage", arr.tobytes()) for name, arr in arrays.items()]
    buffers += [
        Buffer("out", 4 * total_q * heads * dim, "storage", read=True),
        Buffer("lse", 4 * total_q * heads, "storage", read=True),
        Buffer("params", iface.params_size, "uniform", iface.pack_params(values)),
    ]
    return Plan(
        buffers=buffers,
        dispatches=kernel.dispatches(
            values, iface.bind(b.name for b in buffers), source=source, entry_points=entry_points, overrides=overrides
        ),
        outputs=[Output("out", "out", 0, (total_q, heads, dim)), Output("lse", "lse", 0, (total_q, heads))],
    )


def reference(case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]:
    """wgattn.reference.varlen_attention_fwd with this interface's knobs: {"out", "lse"}."""
    arrays, causal, _ = _check(case)
    out, lse = _reference.varlen_attention_fwd(
        arrays["q"],
        arrays["k"],
        arrays["v"],
        arrays["cu_seqlens_q"],
        arrays["cu_seqlens_k"],
        causal=causal,
        scale=case.options.get("scale"),
        causal_align="top_left",
        dtype=dtype,
    )
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
    name: str = "call",
) -> Case:
    """The case computing varlen_attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, ...) on this
    interface; ValueError for what it cannot carry (GQA, a window, softcap, and a bottom-right
    causal mask on a sequence with len_q != len_k, where the alignments differ)."""
    # The reference's check of every option first (one rule, one message for every entry point;
    # only the default scale depends on D, and _check refuses a bad q), then what this interface
    # cannot carry, then the arrays.
    _reference.check_varlen_options(
        np.shape(q)[2] if np.ndim(q) == 3 else 1,
        causal=causal,
        scale=scale,
        window=window,
        softcap=softcap,
        causal_align=causal_align,
    )
    if tuple(window) != (-1, -1):
        raise ValueError(f"window={window!r}: varlen_fwd has no sliding window; only (-1, -1) fits")
    if float(softcap) != 0.0:
        raise ValueError(f"softcap={softcap!r}: varlen_fwd has no softcap; only 0 fits")
    case = Case(
        name=name,
        inputs={"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k},
        options={"causal": causal, "scale": scale},
    )
    arrays, causal, _ = _check(case)  # shapes, heads (no GQA), cu_seqlens
    if causal and causal_align == "bottom_right":
        len_q = np.diff(arrays["cu_seqlens_q"])
        len_k = np.diff(arrays["cu_seqlens_k"])
        unequal = np.nonzero(len_q != len_k)[0]
        if unequal.size:
            b = int(unequal[0])
            raise ValueError(
                f"causal_align='bottom_right' with causal=True: varlen_fwd's causal mask is top-left, "
                f"which differs when len_q != len_k (sequence {b}: {int(len_q[b])} queries, "
                f"{int(len_k[b])} keys); pass causal_align='top_left' or equal lengths"
            )
    case.inputs = arrays
    case.options = {"causal": causal, "scale": scale}
    return case


def _case(
    name: str,
    seed: int,
    lens_q: Sequence[int],
    lens_k: Sequence[int],
    heads: int,
    dim: int,
    causal: bool = False,
    scale: Optional[float] = None,
) -> Case:
    """Standard-normal inputs for sequences of these lengths; the data depend on (seed, name)."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    return Case(
        name=name,
        inputs={
            "q": rng.standard_normal((total_q, heads, dim), dtype=np.float32),
            "k": rng.standard_normal((total_k, heads, dim), dtype=np.float32),
            "v": rng.standard_normal((total_k, heads, dim), dtype=np.float32),
            "cu_seqlens_q": cu_q,
            "cu_seqlens_k": cu_k,
        },
        options={"causal": causal, "scale": scale},
    )


def conformance_cases(seed: int = 0) -> List[Case]:
    """The grid `wgattn check` runs: head dims that cross the kernel's 64-column chunks (1, 59, 64,
    111, 128, 130), lengths 1x147, 113x203 and 203x113, rows of 1024 keys and more, batches with
    empty sequences (no queries, no keys, neither), causal and not, non-default scales."""
    lens_rng = np.random.default_rng(seed)
    many_q = lens_rng.integers(0, 13, size=40).tolist()
    many_k = lens_rng.integers(0, 13, size=40).tolist()
    spec = [
        # name, lens_q, lens_k, heads, head_dim, causal, scale
        ("d1-1x147", [1], [147], 2, 1, False, None),
        ("d64-1x147-causal", [1], [147], 2, 64, True, None),
        ("d59-113x203", [113], [203], 2, 59, False, None),
        ("d59-113x203-causal", [113], [203], 2, 59, True, None),
        ("d111-203x113", [203], [113], 1, 111, False, None),
        ("d111-203x113-causal", [203], [113], 2, 111, True, None),
        ("d130-113x203-scale0.37", [113], [203], 1, 130, False, 0.37),
        ("d128-96x96-causal-scale-0.11", [96], [96], 2, 128, True, -0.11),
        ("d64-48x1100", [48], [1100], 2, 64, False, None),
        ("d64-1024x1024-causal", [1024], [1024], 1, 64, True, None),
        ("d37-batch7-empty", [3, 0, 17, 5, 9, 0, 4], [7, 4, 0, 11, 1, 0, 9], 3, 37, False, None),
        ("d37-batch7-empty-causal", [3, 0, 17, 5, 9, 0, 4], [7, 4, 0, 11, 1, 0, 9], 3, 37, True, None),
        ("d16-batch3-no-keys", [4, 0, 6], [0, 0, 0], 2, 16, True, None),
        ("d59-batch2-no-queries", [0, 0], [5, 3], 1, 59, False, None),
        ("d8-batch40-causal", many_q, many_k, 2, 8, True, None),
        ("d8-batch40", many_q, many_k, 1, 8, False, 2.5),
    ]
    return [_case(name, seed, lq, lk, h, d, causal, scale) for name, lq, lk, h, d, causal, scale in spec]
