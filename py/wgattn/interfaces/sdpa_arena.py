"""The `sdpa_arena` interface (seed C's): q, k, v, an optional padding mask and out in one f32
arena, addressed through per-tensor strides; 144 bytes of params.

    q:    [B, H, Sq, D] (layout "bhsd") or [B, Sq, H, D] ("bshd"), float32
    k, v: [B, H, Sk, D] or [B, Sk, H, D]
    mask: padding only, boolean (True = attend), broadcastable to [B, H, Sq, Sk]
    out:  q's shape

mask_kind: "none"; "causal" (top-left, key j <= query i); "padding"; "window" (keys
i - window .. i: window + 1 keys, seed C's count). The interface has no GQA.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from .. import reference as _reference
from ..plan import Buffer, Output, Plan
from ..registry import Kernel
from . import MAX_ELEMENTS, MAX_SCORES, Case

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = [
    "MASK_KINDS",
    "LAYOUTS",
    "OUTPUTS",
    "SdpaCase",
    "SdpaOptions",
    "options",
    "plan",
    "plan_arrays",
    "reference",
    "reference_out",
    "case_from_reference",
    "conformance_cases",
]

OUTPUTS = ("out",)

MASK_KINDS = {"none": 0, "causal": 1, "padding": 2, "window": 3}
LAYOUTS = _reference.LAYOUTS  # the one definition: the reference's


def _dims(q: np.ndarray, k: np.ndarray, v: np.ndarray, layout: str):
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.ndim != 4:
            raise ValueError(f"{name} must be 4-D ({layout}), got shape {t.shape}")
    if layout == "bhsd":
        (b, h, sq, d), (bk, hk, sk, dk) = q.shape, k.shape
    else:
        (b, sq, h, d), (bk, sk, hk, dk) = q.shape, k.shape
    if (bk, hk, dk) != (b, h, d) or v.shape != k.shape:
        raise ValueError(
            f"sdpa_arena needs k and v of one shape with q's batch, heads and head_dim "
            f"(no GQA); got q {q.shape}, k {k.shape}, v {v.shape} ({layout})"
        )
    return b, h, sq, sk, d


def _strides(layout: str, h: int, s: int, d: int):
    """(batch, head, seq) strides in elements for a contiguous tensor of that layout."""
    return (h * s * d, s * d, d) if layout == "bhsd" else (s * h * d, d, h * d)


class SdpaOptions(NamedTuple):
    """A case's options, checked and typed."""

    mask_kind: str  # one of MASK_KINDS
    window: int  # mask_kind "window": keys i - window .. i; 0 for the other kinds
    scale: Optional[float]  # None: 1/sqrt(D)
    layout: str  # one of LAYOUTS


def options(case: Case) -> SdpaOptions:
    """case.options mask_kind ("none"), window (0), scale (None) and layout ("bhsd") checked:
    ValueError naming a bad one (a case may come from a user)."""
    o = case.options
    kind, window, scale, layout = o.get("mask_kind", "none"), o.get("window", 0), o.get("scale"), o.get("layout", "bhsd")
    if not isinstance(kind, str) or kind not in MASK_KINDS:
        raise ValueError(f"mask_kind must be one of {sorted(MASK_KINDS)}, got {kind!r}")
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    if kind != "window":
        window = 0  # only the window kind reads it
    elif isinstance(window, bool) or not isinstance(window, numbers.Integral):
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    # The reference's rule; only a None scale depends on the head dim.
    return SdpaOptions(kind, int(window), None if scale is None else _reference.check_scale(scale, 1), layout)


def plan(
    kernel: Kernel,
    case: Case,
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The interface skeleton's plan: case.inputs q, k, v (and mask), case.options mask_kind,
    window, scale, layout."""
    o = options(case)
    return plan_arrays(
        kernel,
        case.inputs["q"],
        case.inputs["k"],
        case.inputs["v"],
        mask_kind=o.mask_kind,
        mask=case.inputs.get("mask"),
        window=o.window,
        scale=o.scale,
        layout=o.layout,
        source=source,
        entry_points=entry_points,
        overrides=overrides,
    )


def plan_arrays(
    kernel: Kernel,
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask_kind: str = "none",
    mask: Optional[np.ndarray] = None,
    window: int = 0,
    scale: Optional[float] = None,
    layout: str = "bhsd",
    source: Optional[str] = None,
    entry_points: Optional[Mapping[str, str]] = None,
    overrides: Optional[Mapping[str, int]] = None,
) -> Plan:
    """The dispatch plan running `kernel` (or WGSL `source` on its interface) on these inputs."""
    b, h, sq, sk, d = _dims(q, k, v, layout)
    if mask_kind not in MASK_KINDS:
        raise ValueError(f"mask_kind must be one of {sorted(MASK_KINDS)}, got {mask_kind!r}")
    if (mask is not None) != (mask_kind == "padding"):
        raise ValueError("mask must be given exactly when mask_kind is 'padding'")
    if mask_kind == "window" and not 0 <= int(window) < 2**32:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    scale = _reference.check_scale(scale, d)

    sections = [("q", q), ("k", k), ("v", v)]
    mask_strides: Tuple[int, ...] = (0, 0, 0, 0)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"mask must be boolean (True = attend), got {mask.dtype}")
        if mask.ndim != 4 or any(m not in (1, full) for m, full in zip(mask.shape, (b, h, sq, sk))):
            raise ValueError(f"mask must have shape broadcastable to {(b, h, sq, sk)} with 4 dims, got {mask.shape}")
        dense = np.ascontiguousarray(mask, dtype=np.float32)
        el = [int(s) // 4 for s in dense.strides]
        mask_strides = tuple(0 if n == 1 else s for n, s in zip(mask.shape, el))
        sections.append(("mask", dense))
    offsets: Dict[str, int] = {}
    cursor = 0
    for name, t in sections:
        offsets[name] = cursor
        cursor += t.size
    offsets["out"] = cursor
    total = cursor + q.size

    arena = np.zeros(total, dtype=np.float32)
    for name, t in sections:
        arena[offsets[name] : offsets[name] + t.size] = np.asarray(t, dtype=np.float32).ravel()

    qs, ks = _strides(layout, h, sq, d), _strides(layout, h, sk, d)
    values: Dict[str, float] = {
        "batch": b,
        "heads": h,
        "seq_q": sq,
        "seq_k": sk,
        "head_dim": d,
        "q_off": offsets["q"],
        "k_off": offsets["k"],
        "v_off": offsets["v"],
        "out_off": offsets["out"],
        "mask_off": offsets.get("mask", 0),
        "mask_kind": MASK_KINDS[mask_kind],
        "scale": scale,
        "window": int(window) if mask_kind == "window" else 0,
        "mask_b_stride": mask_strides[0],
        "mask_h_stride": mask_strides[1],
        "mask_sq_stride": mask_strides[2],
        "mask_sk_stride": mask_strides[3],
        "q_b": qs[0],
        "q_h": qs[1],
        "q_s": qs[2],
        "k_b": ks[0],
        "k_h": ks[1],
        "k_s": ks[2],
        "v_b": ks[0],
        "v_h": ks[1],
        "v_s": ks[2],
        "o_b": qs[0],
        "o_h": qs[1],
        "o_s": qs[2],
    }
    iface = kernel.interface
    buffers = [
        Buffer("arena", arena.nbytes, "storage", arena.tobytes(), read=True),
        Buffer("p", iface.params_size, "uniform", iface.pack_params(values)),  # the WGSL's name
    ]
    return Plan(
        buffers=buffers,
        dispatches=kernel.dispatches(
            values, iface.bind(b.name for b in buffers), source=source, entry_points=entry_points, overrides=overrides
        ),
        outputs=[Output("out", "arena", offsets["out"], tuple(q.shape))],
    )


def reference_out(q, k, v, *, mask_kind="none", mask=None, window=0, scale=None, layout="bhsd", dtype=np.float64) -> np.ndarray:
    """wgattn.reference.sdpa with this interface's knobs mapped onto its keywords."""
    kwargs = {"none": {}, "causal": {"causal": True}, "padding": {"mask": mask}, "window": {"window": (int(window), 0)}}[
        mask_kind
    ]
    return _reference.sdpa(q, k, v, scale=scale, layout=layout, dtype=dtype, **kwargs)


def reference(case: Case, dtype: DTypeLike = np.float64) -> Dict[str, np.ndarray]:
    o = options(case)
    return {
        "out": reference_out(
            case.inputs["q"],
            case.inputs["k"],
            case.inputs["v"],
            mask_kind=o.mask_kind,
            mask=case.inputs.get("mask"),
            window=o.window,
            scale=o.scale,
            layout=o.layout,
            dtype=dtype,
        )
    }


def case_from_reference(q, k, v, *, mask=None, causal=False, window=None, scale=None, layout="bhsd", name="call") -> Case:
    """Map wgattn.reference.sdpa's keywords onto this interface's one mask kind, or raise
    ValueError saying what it cannot carry."""
    window = None if window is None else tuple(window)
    kinds = []
    if mask is not None:
        kinds.append("padding")
    if window is not None and window != (-1, -1):
        left, right = window
        if right != 0 and not (causal and (right == -1 or right > 0)):
            raise ValueError(f"sdpa_arena carries windows (w, 0) only (keys i-w..i), got window={window}")
        if left < 0:
            kinds.append("causal")
        else:
            kinds.append("window")
    elif causal:
        kinds.append("causal")
    if len(kinds) > 1:
        raise ValueError(f"sdpa_arena carries one mask kind per call, this call needs {kinds}")
    kind = kinds[0] if kinds else "none"
    inputs = {"q": np.asarray(q, np.float32), "k": np.asarray(k, np.float32), "v": np.asarray(v, np.float32)}
    _dims(inputs["q"], inputs["k"], inputs["v"], layout)
    if mask is not None:
        inputs["mask"] = np.asarray(mask)
    return Case(
        name, inputs, {"mask_kind": kind, "window": window[0] if kind == "window" else 0, "scale": scale, "layout": layout}
    )


def near_tie_big_scores(q: np.ndarray, k: np.ndarray, axis_s: int):
    """q and k (head dim 4, sequence axis `axis_s`) remade so that every score is large and exact in
    float32 and the keys of a row are nearly tied: q_i = c_i (1, 1, 1, 1) with c_i in 3 .. 4.75,
    k_j = (-6 + j / 4, -6, -6, -6); with scale 1/2, s_ij = 2 c_i (j / 4 - 24), from -36 to -57.
    A naive float32 run is then exact but for the softmax's rounding, and a kernel that rounds
    scores in log2 units before the max is taken off (4e-6 at |s| ~ 70) fails (the API fuzz's
    counterexample, docs/reliability.md)."""
    shape_q = [1] * q.ndim
    shape_q[axis_s] = q.shape[axis_s]
    c = 3 + 0.25 * (np.arange(q.shape[axis_s]) % 8)
    q = np.broadcast_to(c.reshape(shape_q), q.shape).astype(np.float32).copy()
    k = np.full(k.shape, -6.0, np.float32)
    index: List[Union[slice, int]] = [slice(None)] * k.ndim
    index[-1] = 0
    shape_k = [1] * (k.ndim - 1)
    shape_k[axis_s] = k.shape[axis_s]
    k[tuple(index)] += (0.25 * (np.arange(k.shape[axis_s]) % 8)).reshape(shape_k)
    return q, k


def conformance_cases(seed: int = 0) -> List[Case]:
    """Awkward sizes, every mask kind, both layouts, fully padded rows (empty), long rows
    (seq_k >= 512 at head_dim 64, where a loop-truncating lavapipe went wrong), D > 64."""
    specs: List[Dict[str, Any]] = [
        dict(batch=1, heads=2, seq_q=113, seq_k=203, head_dim=59, mask="none"),
        dict(batch=2, heads=3, seq_q=64, seq_k=600, head_dim=64, mask="causal", layout="bshd"),
        dict(batch=1, heads=2, seq_q=97, seq_k=1024, head_dim=64, mask="none"),
        dict(batch=1, heads=1, seq_q=33, seq_k=512, head_dim=64, mask="padding"),
        dict(batch=1, heads=2, seq_q=100, seq_k=80, head_dim=130, mask="window", window=7),
        dict(batch=3, heads=2, seq_q=33, seq_k=47, head_dim=16, mask="padding", layout="bshd", seed=3),
        dict(batch=1, heads=1, seq_q=1, seq_k=147, head_dim=111, mask="none"),
        dict(batch=1, heads=2, seq_q=64, seq_k=64, head_dim=256, mask="causal"),
        dict(batch=2, heads=1, seq_q=40, seq_k=40, head_dim=8, mask="window", window=0),
        dict(batch=1, heads=2, seq_q=70, seq_k=30, head_dim=32, mask="causal", layout="bshd"),
        # batch 1 sees no key: rows with no visible key give 0
        dict(batch=2, heads=1, seq_q=5, seq_k=9, head_dim=4, mask="padding", seed=11, empty_batch=1),
        # Large, nearly tied scores (near_tie_big_scores).
        dict(batch=1, heads=4, seq_q=32, seq_k=3, head_dim=4, mask="none", seed=7, near_tie=True),
    ]
    cases = []
    for spec in specs:
        spec.setdefault("seed", seed)
        empty_batch = spec.pop("empty_batch", None)
        near_tie = spec.pop("near_tie", False)
        c = SdpaCase(**spec).to_case()
        if empty_batch is not None:
            c.inputs["mask"][empty_batch] = False
            c.name += "-empty-rows"
        if near_tie:
            c.inputs["q"], c.inputs["k"] = near_tie_big_scores(c.inputs["q"], c.inputs["k"], axis_s=2)
            c.name += "-near-tie-big-scores"
        cases.append(c)
    return cases


@dataclass
class SdpaCase:
    """A `sdpa_arena` case: q [B,H,Sq,D] (or [B,Sq,H,D]), k/v with Sk keys, one mask kind."""

    batch: int = 1
    heads: int = 4
    seq_q: int = 128
    seq_k: int = 128
    head_dim: int = 64
    layout: str = "bhsd"
    mask: str = "causal"  # none | causal | padding | window
    window: int = 16  # mask "window": keys i - window .. i
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("batch", "heads", "seq_q", "seq_k", "head_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65536:
                raise ValueError(f"{name} must be an integer in 1..65536, got {value!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {list(LAYOUTS)}, got {self.layout!r}")
        if self.mask not in MASK_KINDS:
            raise ValueError(f"mask must be one of {list(MASK_KINDS)}, got {self.mask!r}")
        if not isinstance(self.window, int) or not 0 <= self.window < 2**31:
            raise ValueError(f"window must be an integer >= 0, got {self.window!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ValueError(f"seed must be an integer in 0..2**32-1, got {self.seed!r}")
        elements = self.batch * self.heads * self.head_dim * (2 * self.seq_q + 2 * self.seq_k)
        if self.mask == "padding":
            elements += self.batch * self.seq_k
        if elements > MAX_ELEMENTS:
            raise ValueError(f"case too large: {elements} elements in q, k, v and out; at most {MAX_ELEMENTS}")
        scores = self.batch * self.heads * self.seq_q * self.seq_k
        if scores > MAX_SCORES:
            raise ValueError(f"case too large: batch*heads*seq_q*seq_k = {scores} scores; at most {MAX_SCORES}")

    def shape(self, seq: int):
        if self.layout == "bhsd":
            return (self.batch, self.heads, seq, self.head_dim)
        return (self.batch, seq, self.heads, self.head_dim)

    def inputs(self) -> Dict[str, Optional[np.ndarray]]:
        """q, k, v (float32, standard normal) and, for mask "padding", a key mask [B,1,1,Sk]
        keeping a random prefix of each sequence (batch 1 onwards may keep none: empty rows).
        Drawn in bhsd order, so a seed is the same problem in either layout (bshd: transposed)."""
        rs = np.random.RandomState(self.seed)
        b, h, d = self.batch, self.heads, self.head_dim
        q, k, v = (rs.standard_normal((b, h, s, d)).astype(np.float32) for s in (self.seq_q, self.seq_k, self.seq_k))
        if self.layout == "bshd":
            q, k, v = (np.ascontiguousarray(t.transpose(0, 2, 1, 3)) for t in (q, k, v))
        mask = None
        if self.mask == "padding":
            keep = rs.randint(0, self.seq_k + 1, size=self.batch)
            keep[0] = max(keep[0], (self.seq_k + 1) // 2)
            mask = np.arange(self.seq_k)[None, :] < keep[:, None]
            mask = mask.reshape(self.batch, 1, 1, self.seq_k)
        return {"q": q, "k": k, "v": v, "mask": mask}

    @property
    def name(self) -> str:
        extra = f"{self.window}" if self.mask == "window" else ""
        return (
            f"{self.mask}{extra}-{self.layout}-b{self.batch}h{self.heads}-{self.seq_q}x{self.seq_k}-d{self.head_dim}-s{self.seed}"
        )

    def to_case(self, inputs: Optional[Dict[str, Optional[np.ndarray]]] = None) -> Case:
        """This configuration as a conformance Case of the sdpa_arena interface."""
        inputs = self.inputs() if inputs is None else inputs
        return Case(
            self.name,
            {k: v for k, v in inputs.items() if v is not None},
            {"mask_kind": self.mask, "window": self.window, "scale": None, "layout": self.layout},
        )

    def plan(self, kernel: Kernel, inputs: Dict[str, Optional[np.ndarray]], source: Optional[str] = None) -> Plan:
        return plan(kernel, self.to_case(inputs), source=source)

    def reference(self, inputs: Dict[str, Optional[np.ndarray]], dtype=np.float64) -> Dict[str, np.ndarray]:
        return reference(self.to_case(inputs), dtype=dtype)

    def to_dict(self) -> Dict[str, object]:
        return asdict(self)
