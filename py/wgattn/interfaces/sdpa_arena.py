"""The `sdpa_arena` interface (the original sdpa_arena kernel's): q, k, v, an optional padding mask and out in one f32
arena, addressed through per-tensor strides; 144 bytes of params (shaders/interfaces/sdpa_arena.wgsl).

    q:    [B, H, Sq, D] (layout "bhsd") or [B, Sq, H, D] ("bshd"), float32
    k, v: [B, H, Sk, D] or [B, Sk, H, D]
    mask: padding only, boolean (True = attend), 4-D, broadcastable to [B, H, Sq, Sk]
    out:  q's shape

mask_kind: "none"; "causal" (top-left, key j <= query i); "padding"; "window" (keys
i - window .. i: window + 1 keys, the original kernel's count). The interface has no GQA.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

import numpy as np

from .. import reference as _reference
from ..plan import Output, Plan
from ..registry import Kernel
from ..target import Target
from .base import MAX_ELEMENTS, MAX_SCORES, Case, Interface, Layout, data_buffer
from .config import LiveConfig, knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "SdpaArena", "SdpaCase", "MASK_KINDS", "LAYOUTS", "near_tie_big_scores"]

MASK_KINDS = {"none": 0, "causal": 1, "padding": 2, "window": 3}
LAYOUTS = _reference.LAYOUTS  # the one definition: the reference's
# mask kind -> the reference's (left, right) band, top-left aligned
_BANDS = {"none": (-1, -1), "causal": (-1, 0), "padding": (-1, -1), "window": None}


class SdpaOptions(NamedTuple):
    """A case's options, checked and typed."""

    mask_kind: str  # one of MASK_KINDS
    window: int  # mask_kind "window": keys i - window .. i; 0 for the other kinds
    scale: Optional[float]  # None: 1/sqrt(D)
    layout: str  # one of LAYOUTS

    def band(self) -> Tuple[int, int]:
        return (self.window, 0) if self.mask_kind == "window" else _BANDS[self.mask_kind]  # type: ignore[return-value]


def _options(case: Case) -> SdpaOptions:
    """case.options mask_kind ("none"), window (0), scale (None) and layout ("bhsd") checked:
    ValueError naming a bad one (a case may come from a user)."""
    o = case.options
    kind, window, scale, layout = o.get("mask_kind", "none"), o.get("window", 0), o.get("scale"), o.get("layout", "bhsd")
    if not isinstance(kind, str) or kind not in MASK_KINDS:
        raise ValueError(f"mask_kind must be one of {sorted(MASK_KINDS)}, got {kind!r}")
    layout = _reference.check_layout(layout)
    if kind != "window":
        window = 0  # only the window kind reads it
    elif isinstance(window, bool) or not isinstance(window, numbers.Integral) or not 0 <= int(window) < 2**32:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    # The reference's rule; only a None scale depends on the head dim.
    return SdpaOptions(kind, int(window), None if scale is None else _reference.check_scale(scale, 1), layout)


def _carry(q, k, v, mask, layout: str):
    """The tensors checked by wgattn.reference.check_sdpa_inputs, then what this interface cannot
    carry (GQA, a mask of fewer than 4 dims): q, k, v as [B, H, S, D] views."""
    q4, k4, v4, _, group = _reference.check_sdpa_inputs(q, k, v, mask, layout)
    if group != 1:
        raise ValueError(
            f"sdpa_arena needs k and v of one shape with q's batch, heads and head_dim (no GQA); "
            f"got q {np.shape(q)}, k {np.shape(k)}, v {np.shape(v)} ({layout})"
        )
    if mask is not None and np.ndim(mask) != 4:
        raise ValueError(f"mask must have 4 dims, broadcastable to {q4.shape[:3] + (k4.shape[2],)}, got shape {np.shape(mask)}")
    return q4, k4, v4


def _strides(layout: str, h: int, s: int, d: int):
    """(batch, head, seq) strides in elements for a contiguous tensor of that layout."""
    return (h * s * d, s * d, d) if layout == "bhsd" else (s * h * d, d, h * d)


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


@dataclass
class SdpaCase(LiveConfig):
    """sdpa_arena's live configuration: q [B,H,Sq,D] (or [B,Sq,H,D]), k/v with Sk keys, one mask
    kind."""

    batch: int = knob(1, 1, 65536)
    heads: int = knob(4, 1, 65536)
    seq_q: int = knob(128, 1, 65536)
    seq_k: int = knob(128, 1, 65536)
    head_dim: int = knob(64, 1, 65536)
    layout: str = knob("bhsd", choices=LAYOUTS)
    mask: str = knob("causal", choices=list(MASK_KINDS), hint="padding: a random prefix of each batch's keys")
    window: int = knob(16, 0, 2**31 - 1, hint="mask window: keys i - window .. i")
    seed: int = knob(0, 0, 2**32 - 1)

    def check(self) -> None:
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
        keeping a random prefix of each sequence (batch 1 onwards may keep none: empty rows), else
        None. Drawn in bhsd order, so a seed is the same problem in either layout (bshd: transposed)."""
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

    def tensors(self) -> Dict[str, np.ndarray]:
        return {k: v for k, v in self.inputs().items() if v is not None}

    @property
    def name(self) -> str:
        extra = f"{self.window}" if self.mask == "window" else ""
        return (
            f"{self.mask}{extra}-{self.layout}-b{self.batch}h{self.heads}-{self.seq_q}x{self.seq_k}-d{self.head_dim}-s{self.seed}"
        )

    def to_case(self, inputs: Optional[Mapping[str, Optional[np.ndarray]]] = None) -> Case:
        """This configuration as a case of the sdpa_arena interface."""
        inputs = self.inputs() if inputs is None else inputs
        return Case(
            self.name,
            {k: v for k, v in inputs.items() if v is not None},
            {"mask_kind": self.mask, "window": self.window, "scale": None, "layout": self.layout},
        )

    def plan(
        self, kernel: Kernel, inputs: Mapping[str, Optional[np.ndarray]], target: Target, source: Optional[str] = None
    ) -> Plan:
        """The plan of this configuration's case on `inputs` (INTERFACE.plan)."""
        return INTERFACE.plan(kernel, self.to_case(inputs), target, source=source)

    def reference(self, inputs: Mapping[str, Optional[np.ndarray]], dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """The reference on this configuration's case on `inputs` (INTERFACE.reference)."""
        return INTERFACE.reference(self.to_case(inputs), dtype=dtype)


class SdpaArena(Interface):
    name = "sdpa_arena"
    OUTPUTS = ("out",)
    Config = SdpaCase
    bench_op = "fwd"

    def layout(self, case: Case) -> Layout:
        o = _options(case)
        i = case.inputs
        mask = i.get("mask")
        q, k, _ = _carry(i["q"], i["k"], i["v"], mask, o.layout)
        b, h, sq, d = q.shape
        sk = k.shape[2]
        if (mask is not None) != (o.mask_kind == "padding"):
            raise ValueError("mask must be given exactly when mask_kind is 'padding'")
        scale = _reference.check_scale(o.scale, d)
        sections = [(name, np.asarray(i[name])) for name in ("q", "k", "v")]
        mask_strides: Tuple[int, ...] = (0, 0, 0, 0)
        if mask is not None:
            mask = np.asarray(mask)
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
        total = cursor + sections[0][1].size
        arena = np.zeros(total, dtype=np.float32)
        for name, t in sections:
            arena[offsets[name] : offsets[name] + t.size] = np.asarray(t, dtype=np.float32).ravel()
        qs, ks = _strides(o.layout, h, sq, d), _strides(o.layout, h, sk, d)
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
            "mask_kind": MASK_KINDS[o.mask_kind],
            "scale": scale,
            "window": o.window,
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
        buffers = {"arena": data_buffer("arena", arena, read=True)}
        return Layout(values, buffers, [Output("out", "arena", offsets["out"], tuple(np.shape(i["q"])))])

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.sdpa with this interface's mask kind mapped onto its keywords."""
        o = _options(case)
        i = case.inputs
        kwargs: Dict[str, Dict[str, Any]] = {
            "none": {},
            "causal": {"causal": True},
            "padding": {"mask": i.get("mask")},
            "window": {"window": (o.window, 0)},
        }
        out = _reference.sdpa(i["q"], i["k"], i["v"], scale=o.scale, layout=o.layout, dtype=dtype, **kwargs[o.mask_kind])
        return {"out": out}

    def case_from_reference(
        self, q, k, v, *, mask=None, causal=False, window=None, scale=None, layout="bhsd", name="call"
    ) -> Case:
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
            kinds.append("causal" if left < 0 else "window")
        elif causal:
            kinds.append("causal")
        if len(kinds) > 1:
            raise ValueError(f"sdpa_arena carries one mask kind per call, this call needs {kinds}")
        kind = kinds[0] if kinds else "none"
        _carry(q, k, v, mask, layout)
        inputs = {"q": np.asarray(q, np.float32), "k": np.asarray(k, np.float32), "v": np.asarray(v, np.float32)}
        if mask is not None:
            inputs["mask"] = np.asarray(mask)
        return Case(
            name, inputs, {"mask_kind": kind, "window": window[0] if kind == "window" else 0, "scale": scale, "layout": layout}
        )

    # Awkward sizes, every mask kind, both layouts, fully padded rows (empty), long rows (seq_k >=
    # 512 at head_dim 64, where a loop-truncating lavapipe went wrong), D > 64, large nearly tied
    # scores (near_tie_big_scores).
    GRID = [
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
        dict(batch=1, heads=4, seq_q=32, seq_k=3, head_dim=4, mask="none", seed=7, near_tie=True),
    ]

    def grid_rng(self, seed: int) -> int:
        return seed  # each row draws from its own seed (a SdpaCase)

    def grid_case(self, rng, empty_batch=None, near_tie=False, **spec) -> Case:
        spec.setdefault("seed", rng)
        c = SdpaCase(**spec).to_case()
        if empty_batch is not None:
            c.inputs["mask"][empty_batch] = False
            c.name += "-empty-rows"
        if near_tie:
            c.inputs["q"], c.inputs["k"] = near_tie_big_scores(c.inputs["q"], c.inputs["k"], axis_s=2)
            c.name += "-near-tie-big-scores"
        return c

    def live_case(self, config: SdpaCase, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        case = config.to_case(tensors)
        case.name = name
        return case

    def bench_cases(self, dense: Mapping[str, np.ndarray], causal: bool) -> List[Case]:
        return [self.case_from_reference(dense["q"], dense["k"], dense["v"], causal=causal)]

    def probabilities(self, case: Case, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
        """Queries (batches stacked) by keys: the first batches and queries that fit."""
        i = case.inputs
        o = _options(case)
        q, k = i["q"].astype(np.float64), i["k"].astype(np.float64)
        if o.layout == "bshd":
            q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
        sk, d = k.shape[2], q.shape[3]
        sq = max(1, min(q.shape[2], max_cells // sk))
        b = max(1, min(q.shape[0], max_cells // (sq * sk)))
        q, k = q[:b, :, :sq], k[:b]
        scale = _reference.check_scale(o.scale, d)
        visible = np.broadcast_to(_reference.band_mask(sq, sk, 0, *o.band()), (b, sq, sk))
        if o.mask_kind == "padding":
            visible = visible & i["mask"][:b].reshape(b, 1, sk)
        s = np.matmul(q[:, head], k[:, head].transpose(0, 2, 1)) * scale
        p, _ = _reference.masked_softmax(s, visible, np.dtype(np.float64))
        shown = "" if (b, sq) == (i["q"].shape[0], i["q"].shape[2]) else f"; only the first {b} batches, {sq} queries fit"
        return (p.reshape(b * sq, sk), visible.reshape(b * sq, sk), "rows: queries (batches stacked%s); columns: keys" % shown)

    def output_axes(self, case: Case, output: str, ndim: int) -> List[str]:
        """out is [B, H, S, D] ("bhsd") or [B, S, H, D] ("bshd")."""
        if case.options.get("layout", "bhsd") == "bshd":
            return ["batch", "query", "head", "dim"][:ndim]
        return ["batch", "head", "query", "dim"][:ndim]

    def view_axes(self, case: Case, output: str, ndim: int) -> Tuple[str, str]:
        return "query (batches stacked)", "dim"

    def probability_axes(self, case: Case) -> Tuple[str, str]:
        return "query (batches stacked)", "key"

    def head_view(self, case: Case, output: np.ndarray, head: int, heads: int) -> np.ndarray:
        """[B, H, S, D] or [B, S, H, D]: the head's rows, batches stacked."""
        axis = 2 if case.options.get("layout", "bhsd") == "bshd" else 1
        x = np.take(np.asarray(output, dtype=np.float64), head, axis=axis)
        return x.reshape(-1, x.shape[-1])


INTERFACE = SdpaArena()
