"""What the packed variable-length interfaces (varlen_fwd, flash_fwd, varlen_bwd) share: the check
of q, k, v and the prefix sums (wgattn.reference's, plus the kernels' index limits), their options
(the reference's check_varlen_options), the Params they have in common, their grid's drawing, their
live configuration, and the geometry of a packed case that pictures and localisation read."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from .. import ranges
from .. import reference as _reference
from ..bandwidth import is_device_filled
from .base import MAX_ELEMENTS, MAX_SCORES, Case, Geometry, Interface, Option
from .config import LiveConfig, knob

__all__ = [
    "CAUSAL_ALIGNS",
    "U32_MAX",
    "I32_MAX",
    "PackedInterface",
    "PackedConfig",
    "DEFAULT_OPTIONS",
    "SOFTCAP_ROWS",
    "ALIBI_SINK_ROWS",
    "MASK_ROWS",
    "CAP_SCALE_ROWS",
    "qkv",
    "Packed",
    "head_params",
    "packed_inputs",
    "head_inputs",
    "with_heads",
    "params",
    "clip_window",
    "random_packed",
    "draw_packed",
]

CAUSAL_ALIGNS = _reference.CAUSAL_ALIGNS
I32_MAX = 2**31 - 1
U32_MAX = 2**32 - 1

# The options of wgattn.reference's varlen functions at their defaults, read from the reference's
# one check of them (a grid case overrides some).
DEFAULT_OPTIONS: Dict[str, Option] = {
    name: p.default
    for name, p in inspect.signature(_reference.check_varlen_options).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
}


class Packed(NamedTuple):
    """`qkv`'s result: float32 tensors, int32 prefix sums, float32 per-head parameters or None."""

    q: np.ndarray  # [total_q, Hq, D]
    k: np.ndarray  # [total_k, Hkv, D]
    v: np.ndarray  # [total_k, Hkv, D]
    cu_q: np.ndarray  # [batch + 1]
    cu_k: np.ndarray  # [batch + 1]
    alibi_slopes: Optional[np.ndarray]  # [Hq]
    sinks: Optional[np.ndarray]  # [Hq]


def qkv(
    q: Any, k: Any, v: Any, cu_seqlens_q: Any, cu_seqlens_k: Any, copies: int = 1, alibi_slopes: Any = None, sinks: Any = None
) -> Packed:
    """q, k, v (float32, [total, heads, D], GQA shapes), the int32 prefix sums and the ALiBi slopes
    and sinks (float32 [Hq], or None), checked by wgattn.reference.check_varlen_inputs, then
    against the kernels' index arithmetic: `copies` [total, heads, D] tensors share one buffer,
    element indices fit in u32, totals in i32."""
    c = _reference.check_varlen_inputs(q, k, v, cu_seqlens_q, cu_seqlens_k, alibi_slopes, sinks)
    # an input the GPU fills (a benchmark's, wgattn.bandwidth.device_filled) holds no bytes to copy
    q, k, v = (
        t if is_device_filled(t) and t.dtype == np.float32 else np.ascontiguousarray(t, dtype=np.float32) for t in (c.q, c.k, c.v)
    )
    if copies * q.size > U32_MAX or copies * k.size > U32_MAX:
        raise ValueError(f"q ({q.shape}) or k ({k.shape}) is too large: element indices must fit in u32")
    if q.shape[0] > I32_MAX or k.shape[0] > I32_MAX:
        raise ValueError("total_q and total_k must fit in i32")
    slopes, sink = (None if a is None else a.astype(np.float32) for a in (c.alibi_slopes, c.sinks))
    return Packed(q, k, v, c.cu_q.astype(np.int32), c.cu_k.astype(np.int32), slopes, sink)


def packed_inputs(p: Packed) -> Dict[str, np.ndarray]:
    """A case's inputs from checked arrays: the ALiBi slopes and sinks only where given."""
    out = {"q": p.q, "k": p.k, "v": p.v, "cu_seqlens_q": p.cu_q, "cu_seqlens_k": p.cu_k}
    for name in ("alibi_slopes", "sinks"):
        if getattr(p, name) is not None:
            out[name] = getattr(p, name)
    return out


def head_params(p: Packed) -> np.ndarray:
    """The per-head parameters as the kernels read them, float32 [2, Hq]: the ALiBi slopes (0
    without: no bias), then the sinks (read only where Params.sinks_on says so)."""
    zeros = np.zeros(p.q.shape[1], dtype=np.float32)
    return np.stack([zeros if a is None else a for a in (p.alibi_slopes, p.sinks)])


def options(opts: Mapping[str, Option], head_dim: int) -> _reference.VarlenOptions:
    """The case's options, checked by wgattn.reference.check_varlen_options (the reference's rules
    and messages, nothing else); absent ones take the reference's defaults."""
    return _reference.check_varlen_options(
        head_dim, **{name: opts.get(name, default) for name, default in DEFAULT_OPTIONS.items()}
    )


def case_options(head_dim: int, keywords: Mapping[str, Any]) -> Dict[str, Option]:
    """A case's options from the reference's keywords (absent ones at their defaults), checked
    (`options`): causal a bool, the window a tuple of ints, the rest as given. TypeError for a
    keyword the reference does not take, as a Python call would raise."""
    unknown = sorted(set(keywords) - set(DEFAULT_OPTIONS))
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) {unknown}; the options are {list(DEFAULT_OPTIONS)}")
    opts: Dict[str, Option] = dict(DEFAULT_OPTIONS, **keywords)
    options(opts, head_dim)
    opts["window"] = tuple(int(w) for w in opts["window"])  # type: ignore[union-attr]  # a pair: options() checked it
    opts["causal"] = bool(opts["causal"])
    return opts


def keywords(case: Case) -> Dict[str, Option]:
    """The case's options as the reference's keywords, unconverted: the reference checks them."""
    return {name: case.options.get(name, default) for name, default in DEFAULT_OPTIONS.items()}


def clip_window(left: int, right: int, total_q: int, total_k: int) -> Tuple[int, int]:
    """A bound of total_q + total_k or more excludes nothing (|i + offset - j| < total_q + total_k):
    make it -1, which keeps the kernels' i32 index arithmetic far from overflow."""
    reach = total_q + total_k
    return (-1 if left >= reach else left), (-1 if right >= reach else right)


def params(p: Packed, opts: Mapping[str, Option]) -> Dict[str, float]:
    """The Params fields flash_fwd and varlen_bwd share (shaders/lib/packed_params.wgsl): sizes,
    the checked options, the window clipped (`clip_window`), whether there are ALiBi slopes and
    sinks."""
    q, k, cu_q = p.q, p.k, p.cu_q
    total_q, hq, d = q.shape
    total_k, hkv, _ = k.shape
    o = options(opts, d)
    left, right = clip_window(o.left, o.right, total_q, total_k)
    return {
        "total_q": int(total_q),
        "total_k": int(total_k),
        "heads_q": int(hq),
        "heads_kv": int(hkv),
        "head_dim": int(d),
        "batch_size": int(cu_q.shape[0] - 1),
        "window_left": left,
        "window_right": right,
        "align_top_left": int(o.causal_align == "top_left"),
        "softcap": o.softcap,
        "scale": o.scale,
        "alibi_on": int(p.alibi_slopes is not None),
        "sinks_on": int(p.sinks is not None),
    }


# --- The grid ---------------------------------------------------------------------------------


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


def row(
    name: str,
    seqs,
    hq: int,
    hkv: int,
    d: int,
    options: Optional[Dict[str, Option]] = None,
    amp: float = 1.0,
    alibi: bool = False,
    sinks: bool = False,
) -> Dict:
    """A grid row of the packed interfaces: sequences [(len_q, len_k)], heads, head dim, options,
    input scale, ALiBi slopes and sinks or not (the keywords of their grid_case)."""
    return dict(name=name, seqs=seqs, hq=hq, hkv=hkv, d=d, options=options or {}, amp=amp, alibi=alibi, sinks=sinks)


def alibi_slopes(hq: int) -> np.ndarray:
    """ALiBi's geometric slopes, 2^-1 .. 2^-8 over the query heads (float32 [Hq])."""
    return (2.0 ** -np.linspace(1, 8, hq)).astype(np.float32)


def draw_sinks(rs: np.random.RandomState, hq: int) -> np.ndarray:
    """Sink logits near a row's log-sum-exp (a few units), so that a sink takes a visible share
    of some rows and little of others (float32 [Hq])."""
    return (3.0 + 2.0 * rs.standard_normal(hq)).astype(np.float32)


def with_heads(case: Case, variant: str) -> Case:
    """A benchmark case of a packed interface that carries ALiBi slopes and sinks, with those the
    variant names ("alibi", "sinks", "alibi+sinks"): the geometric slopes, sinks drawn from seed 0
    (the kernels' work does not depend on their values)."""
    parts = set(variant.split("+"))
    if not parts <= {"alibi", "sinks"}:
        raise ValueError(f"variant must name alibi, sinks or alibi+sinks, got {variant!r}")
    hq = int(np.shape(case.inputs["q"])[1])
    heads = head_inputs(np.random.RandomState(0), hq, "alibi" in parts, "sinks" in parts)
    return Case(f"{case.name}-{variant}", {**case.inputs, **heads}, dict(case.options))


def head_inputs(rs: np.random.RandomState, hq: int, alibi: bool, sinks: bool) -> Dict[str, np.ndarray]:
    """A grid case's or live configuration's ALiBi slopes and sinks, those asked for (sinks drawn
    from `rs`, after everything else)."""
    out = {}
    if alibi:
        out["alibi_slopes"] = alibi_slopes(hq)
    if sinks:
        out["sinks"] = draw_sinks(rs, hq)
    return out


# The mask's geometry, which the forward's and the backward's grids both hold their kernels to:
# unequal lengths both ways, empty sequences and rows with no key, causal in both alignments,
# windows left, right, both and (0, 0).
MASK_ROWS = [
    row("dense-d59-mha-unequal", [(113, 203), (203, 113)], 2, 2, 59),
    row("causal-br-d64-mqa-empty-seqs", [(37, 0), (0, 29), (50, 50), (0, 0), (17, 71), (45, 19)], 4, 1, 64, {"causal": True}),
    row("causal-tl-d111-gqa3", [(80, 40), (40, 80), (1, 147)], 6, 2, 111, {"causal": True, "causal_align": "top_left"}),
    row("causal-br-d130-mqa-empty-rows", [(90, 60), (33, 33)], 3, 1, 130, {"causal": True}),
    row("window-left-br-d64", [(70, 100), (100, 70)], 2, 2, 64, {"window": (16, -1)}),
    row("window-right-tl-d59-gqa3", [(60, 90), (90, 60)], 3, 1, 59, {"window": (-1, 5), "causal_align": "top_left"}),
    row("window-both-causal-br-d130", [(77, 77), (40, 120)], 2, 1, 130, {"window": (8, 3), "causal": True}),
    row("window-0-0-tl-d64-empty-rows", [(5, 3), (40, 64), (64, 40)], 2, 2, 64, {"window": (0, 0), "causal_align": "top_left"}),
]
# Softcap and scale (a negative one too), in both grids as well.
CAP_SCALE_ROWS = [
    row("softcap-d64-gqa3", [(64, 96), (31, 31)], 3, 1, 64, {"softcap": 5.0, "scale": 0.5}),
    row(
        "softcap-causal-tl-d130-big",
        [(48, 70)],
        2,
        2,
        130,
        {"softcap": 20.0, "causal": True, "causal_align": "top_left"},
        2.0,
    ),
    row("neg-scale-window-d59", [(40, 57), (57, 40)], 2, 1, 59, {"scale": -0.3, "window": (6, 6)}),
]

# ALiBi and sinks (gpt-oss), alone and together, with the mask's geometry: rows with no key (whose
# lse is then the sink), the bias on both sides of the diagonal (no causal, a right window), GQA,
# softcap before the bias, both alignments; a head dim of 512, a long causal row and 64k keys.
ALIBI_SINK_ROWS = [
    row(
        "alibi-sinks-causal-br-d64-gqa3-empty-rows",
        [(90, 60), (33, 33), (5, 0), (0, 4)],
        6,
        2,
        64,
        {"causal": True},
        alibi=True,
        sinks=True,
    ),
    row("alibi-dense-tl-d59-unequal", [(70, 100), (100, 70)], 4, 4, 59, {"causal_align": "top_left"}, alibi=True),
    row("alibi-window-right-br-d130-mqa", [(60, 90), (90, 60)], 3, 1, 130, {"window": (-1, 5)}, alibi=True),
    row(
        "sinks-window-softcap-tl-d111-gqa2",
        [(80, 40), (40, 80)],
        4,
        2,
        111,
        {"window": (8, 3), "softcap": 10.0, "causal_align": "top_left"},
        sinks=True,
    ),
    row("sinks-dense-d8-many-short", [(n % 7, (5 * n) % 9) for n in range(24)], 2, 1, 8, sinks=True),
    row(
        "alibi-sinks-softcap-causal-br-d512",
        [(40, 70), (33, 20)],
        2,
        1,
        512,
        {"causal": True, "softcap": 20.0},
        alibi=True,
        sinks=True,
    ),
    row("long-alibi-sinks-causal-br-d64", [(1023, 1024)], 2, 1, 64, {"causal": True}, alibi=True, sinks=True),
    # 64k keys a row, no ALiBi to shorten the sums: a long context, kept cheap (2 heads, D = 16)
    row("long-64k-sinks-causal-br-d16", [(48, 65536)], 2, 1, 16, {"causal": True}, sinks=True),
]

# Softcap on small scores (|s / cap| < 0.05) with long MQA/GQA groups and more queries than keys:
# a driver's tanh whose error is absolute near 0 (lavapipe: 1e-7, thousands of ulps) shifts every
# score by cap * 1e-7, and dv sums that over the whole group. The forward's and the backward's
# grids both end with these.
SOFTCAP_ROWS = [
    row("softcap30-mqa6-d64-unequal", [(384, 96), (200, 333)], 6, 1, 64, {"softcap": 30.0, "scale": 0.05}),
    row("softcap50-causal-br-mqa6-d64", [(384, 96), (200, 333)], 6, 1, 64, {"softcap": 50.0, "causal": True, "scale": 0.02}),
    row(
        "softcap30-window-tl-gqa4-d64",
        [(300, 40), (150, 250)],
        8,
        2,
        64,
        {"softcap": 30.0, "window": (64, 8), "causal_align": "top_left", "scale": 0.02},
    ),
]


def seqs_label(seqs) -> str:
    return "+".join(f"{a}x{b}" for a, b in seqs)


# --- Live configuration -----------------------------------------------------------------------


def draw_packed(seed: int, batch: int, heads: int, kv_heads: int, seq_q: int, seq_k: int, d: int, padding: bool):
    """Sequence lengths (as cu_seqlens), then q, k, v and dout, standard normal float32: `batch`
    sequences of seq_q queries and seq_k keys, or with `padding` a random number of each (0
    included: empty sequences and rows with no key), sequence 0 keeping at least half. Every packed
    interface draws these, dout included, so one seed is one problem whichever kernel runs it."""
    rs = np.random.RandomState(seed)
    lens_q = np.full(batch, seq_q)
    lens_k = np.full(batch, seq_k)
    if padding:
        lens_q = rs.randint(0, seq_q + 1, size=batch)
        lens_k = rs.randint(0, seq_k + 1, size=batch)
        lens_q[0] = max(lens_q[0], (seq_q + 1) // 2)
        lens_k[0] = max(lens_k[0], (seq_k + 1) // 2)
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
    q = rs.standard_normal((total_q, heads, d)).astype(np.float32)
    k = rs.standard_normal((total_k, kv_heads, d)).astype(np.float32)
    v = rs.standard_normal((total_k, kv_heads, d)).astype(np.float32)
    dout = rs.standard_normal((total_q, heads, d)).astype(np.float32)
    return {"q": q, "k": k, "v": v, "dout": dout, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}


def check_size(batch: int, heads: int, kv_heads: int, seq_q: int, seq_k: int, d: int) -> None:
    """A packed live case within MAX_ELEMENTS (q, k, v, out and their gradients) and MAX_SCORES."""
    elements = batch * d * (4 * heads * seq_q + 4 * kv_heads * seq_k)
    if elements > MAX_ELEMENTS:
        raise ValueError(f"case too large: {elements} elements in q, k, v, out and their gradients; at most {MAX_ELEMENTS}")
    scores = batch * heads * seq_q * seq_k
    if scores > MAX_SCORES:
        raise ValueError(f"case too large: batch*heads*seq_q*seq_k = {scores} scores; at most {MAX_SCORES}")


@dataclass
class PackedConfig(LiveConfig):
    """`batch` sequences of seq_q queries and seq_k keys packed token-major ([total, heads, D]);
    with `padding` each sequence keeps a random number of them (0 included: empty sequences and
    rows with no key), sequence 0 at least half."""

    batch: int = knob(2, 1, 256)
    heads: int = knob(4, 1, 256)
    heads_kv: int = knob(0, 0, 256, sentinels={0: "as many as heads"}, hint="key/value heads (GQA)", divides="heads")
    seq_q: int = knob(128, 1, 65536)
    seq_k: int = knob(128, 1, 65536)
    head_dim: int = knob(64, 1, 1024)
    causal: bool = knob(True)
    causal_align: str = knob("bottom_right", choices=CAUSAL_ALIGNS, hint="the same when a sequence has len_q == len_k")
    window_left: int = knob(-1, -1, I32_MAX, sentinels={-1: "unbounded"}, hint="keys i - left .. i + right visible")
    window_right: int = knob(-1, -1, I32_MAX, sentinels={-1: "unbounded"})
    softcap: float = knob(0.0, f32="softcap", sentinels={0: "off"}, hint="scores become softcap * tanh(s / softcap)")
    alibi: bool = knob(False, hint="ALiBi's geometric slopes per query head: score - slope * |key - query position|")
    sinks: bool = knob(False, hint="a logit per query head in the softmax's denominator (gpt-oss)")
    padding: bool = knob(False, hint="ragged sequence lengths: empty sequences and rows with no key")
    seed: int = knob(0, 0, U32_MAX)

    @property
    def kv_heads(self) -> int:
        return self.heads_kv or self.heads

    def check(self) -> None:
        check_size(self.batch, self.heads, self.kv_heads, self.seq_q, self.seq_k, self.head_dim)

    def tensors(self) -> Dict[str, np.ndarray]:
        """q, k, v, dout and the prefix sums (`draw_packed`), then the ALiBi slopes and sinks asked
        for (the sinks drawn from the seed after everything else)."""
        t = draw_packed(self.seed, self.batch, self.heads, self.kv_heads, self.seq_q, self.seq_k, self.head_dim, self.padding)
        return {**t, **head_inputs(np.random.RandomState([self.seed, 1]), self.heads, self.alibi, self.sinks)}

    def options(self) -> Dict[str, Option]:
        """The reference's keywords."""
        return {
            "causal": self.causal,
            "window": (self.window_left, self.window_right),
            "softcap": float(self.softcap),
            "causal_align": self.causal_align,
        }


# --- The interfaces' common part ----------------------------------------------------------------


class PackedInterface(Interface):
    """An interface over packed sequences (cu_seqlens): what its forward's arithmetic holds, its
    pictures and localisation geometry."""

    KEY_OUTPUTS: ClassVar[Tuple[str, ...]] = ()  # outputs indexed by key tokens (dk, dv)

    def packed(self, case: Case):
        """The case's q, k, v and prefix sums as given (wgattn.reference's check: no conversion),
        and its options checked."""
        i = case.inputs
        missing = [n for n in ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k") if i.get(n) is None]
        if missing:
            raise ValueError(f"{missing[0]} is missing from the case's inputs")
        a = _reference.check_varlen_inputs(
            i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"], i.get("alibi_slopes"), i.get("sinks")
        )
        return a, options(case.options, a.q.shape[2])

    def scores_bound(self, case: Case, limit: float = ranges.SAFE, why: str = "") -> ranges.Bound:
        """The scores' bound (wgattn.ranges.scores), ALiBi's bias included: |j - (i + offset)| is
        at most the longest query sequence plus the longest key sequence."""
        a, o = self.packed(case)
        longest = [int(np.diff(cu).max()) if cu.shape[0] > 1 else 0 for cu in (a.cu_q, a.cu_k)]
        slopes = a.alibi_slopes
        slope = float(np.max(np.abs(slopes))) if slopes is not None and np.size(slopes) else 0.0
        return ranges.scores(o.scale, a.q, a.k, slope, sum(longest) if slope else 0, limit, why)

    def magnitudes(self, case: Case) -> Dict[str, float]:
        """The inputs' largest magnitudes and |scale| (None resolved: 1 / sqrt(D))."""
        _, o = self.packed(case)
        return dict(super().magnitudes(case), scale=abs(o.scale))

    def f32_bounds(self, case: Case) -> List[ranges.Bound]:
        """The forward's: the scores, and out's running sum over the longest sequence's keys."""
        a, _ = self.packed(case)
        longest = int(np.diff(a.cu_k).max()) if a.cu_k.shape[0] > 1 else 0
        return [self.scores_bound(case), ranges.sums(a.v, longest)]

    def band(self, case: Case) -> Tuple[int, int, str, float, float]:
        """(window_left, window_right with causal folded in, causal_align, softcap, scale)."""
        o = options(case.options, int(np.shape(case.inputs["q"])[-1]))
        return o.left, o.right, o.causal_align, o.softcap, o.scale

    def probabilities(self, case: Case, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
        """A block per sequence on the diagonal of (total_q, total_k): the first sequences (and of
        one long sequence, the first rows) whose picture has at most `max_cells` cells."""
        i = case.inputs
        q, k = i["q"].astype(np.float64), i["k"].astype(np.float64)
        cu_q, cu_k = np.asarray(i["cu_seqlens_q"]), np.asarray(i["cu_seqlens_k"])
        kv = head // (q.shape[1] // k.shape[1])
        left, right, align, cap, scale = self.band(case)
        n = len(cu_q) - 1
        while n > 1 and int(cu_q[n]) * int(cu_k[n]) > max_cells:
            n -= 1
        cu_q, cu_k = cu_q[: n + 1], cu_k[: n + 1]
        rows = max(1, min(int(cu_q[-1]), max_cells // max(int(cu_k[-1]), 1)))
        p = np.zeros((rows, int(cu_k[-1])))
        visible = np.zeros(p.shape, dtype=bool)
        for bq in range(len(cu_q) - 1):
            q0, q1, k0, k1 = int(cu_q[bq]), int(cu_q[bq + 1]), int(cu_k[bq]), int(cu_k[bq + 1])
            if q1 == q0 or k1 == k0 or q0 >= rows:
                continue
            m = _reference.seq_mask(q1 - q0, k1 - k0, align, left, right)[: rows - q0]
            q1 = q0 + m.shape[0]
            s = q[q0:q1, head] @ k[k0:k1, kv].T * scale
            if cap > 0:
                s = cap * np.tanh(s / cap)
            p[q0:q1, k0:k1], _ = _reference.masked_softmax(s, m, np.dtype(np.float64))
            visible[q0:q1, k0:k1] = m
        whole = n == len(i["cu_seqlens_q"]) - 1 and rows == int(cu_q[-1])
        shown = "" if whole else f"; only the first {n} of {len(i['cu_seqlens_q']) - 1} sequences, {rows} rows fit"
        return p, visible, f"rows: packed queries; columns: packed keys (one block per sequence{shown})"

    def output_axes(self, case: Case, output: str, ndim: int) -> List[str]:
        """[token, head, dim]: key tokens and key/value heads for the outputs by key (dk, dv)."""
        if output in self.KEY_OUTPUTS:
            return ["key token", "key/value head", "dim"][:ndim]
        return ["query token", "head", "dim"][:ndim]

    def probability_axes(self, case: Case) -> Tuple[str, str]:
        return "query token (sequences packed)", "key token (sequences packed)"

    def geometry(self, case: Case, output: str, shape: Tuple[int, ...]) -> Optional[Geometry]:
        """Per token of the output's first axis: (sequence, row in it, first and last visible
        partner, partner count); keys for the KEY_OUTPUTS, queries otherwise."""
        cu_q = case.inputs.get("cu_seqlens_q")
        cu_k = case.inputs.get("cu_seqlens_k")
        if cu_q is None or cu_k is None or len(shape) < 2:
            return None
        try:
            left, right, align, _, _ = self.band(case)
        except (ValueError, TypeError, IndexError, KeyError):
            return None
        q, k = case.inputs["q"], case.inputs["k"]
        group = max(1, int(np.shape(q)[1]) // max(1, int(np.shape(k)[1])))
        by_key = output in self.KEY_OUTPUTS
        cu_q = np.asarray(cu_q, dtype=np.int64)
        cu_k = np.asarray(cu_k, dtype=np.int64)
        cu = cu_k if by_key else cu_q
        tokens = shape[0]
        if int(cu[-1]) != tokens:
            return None
        seq = np.zeros(tokens, dtype=np.int64)
        pos = np.zeros(tokens, dtype=np.int64)
        lo = np.zeros(tokens, dtype=np.int64)
        hi = np.full(tokens, -1, dtype=np.int64)
        for b in range(len(cu) - 1):
            len_q, len_k = int(cu_q[b + 1] - cu_q[b]), int(cu_k[b + 1] - cu_k[b])
            off = 0 if align == "top_left" else len_k - len_q
            t = np.arange(int(cu[b]), int(cu[b + 1]))
            p = t - int(cu[b])
            seq[t], pos[t] = b, p
            if by_key:  # queries i that see key p: p - off - right <= i <= p - off + left
                a = np.maximum(0, p - off - right) if right >= 0 else np.zeros_like(p)
                z = np.minimum(len_q - 1, p - off + left) if left >= 0 else np.full_like(p, len_q - 1)
            else:  # keys j that query p sees: p + off - left <= j <= p + off + right
                a = np.maximum(0, p + off - left) if left >= 0 else np.zeros_like(p)
                z = np.minimum(len_k - 1, p + off + right) if right >= 0 else np.full_like(p, len_k - 1)
            lo[t], hi[t] = a, z
        count = np.maximum(0, hi - lo + 1) * (group if by_key else 1)
        return {
            "seq": seq,
            "pos": pos,
            "lo": lo,
            "hi": hi,
            "terms": count,
            "partner": "queries" if by_key else "keys",
            "row": "key" if by_key else "row",
        }
