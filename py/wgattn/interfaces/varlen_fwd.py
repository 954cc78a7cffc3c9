"""The `varlen_fwd` interface (the original varlen_fwd kernel's): packed variable-length attention forward with LSE
(shaders/interfaces/varlen_fwd.wgsl).

    q:            [total_q, H, D] float32, the queries of every sequence packed along axis 0
    k, v:         [total_k, H, D] float32 (as many heads as q: the interface has no GQA)
    cu_seqlens_q: [batch + 1] int32 prefix sums: sequence b owns rows cu_seqlens_q[b] : [b + 1]
    cu_seqlens_k: [batch + 1] int32, the same for k and v
    out:          [total_q, H, D]
    lse:          [total_q, H] (token-major), natural log of the softmax denominator

Options: `causal` (bool; top-left, the original kernel's: query position i sees key positions j <= i of its
sequence) and `scale` (None: 1/sqrt(D)). A row with no visible key (a sequence without keys)
gives out 0 and lse -inf. The reference is wgattn.reference.varlen_attention_fwd with
causal_align="top_left".
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Mapping, Tuple

import numpy as np

from .. import reference as _reference
from ..plan import Output
from ._varlen import DEFAULT_OPTIONS, I32_MAX, U32_MAX, PackedInterface, case_options, check_size, draw_packed, qkv
from .base import Case, Layout, data_buffer, out_buffer
from .config import LiveConfig, knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "VarlenFwd", "VarlenFwdConfig"]

INPUTS = ("q", "k", "v", "cu_seqlens_q", "cu_seqlens_k")
OPTIONS = ("causal", "scale")


def _check(case: Case) -> Tuple[Dict[str, np.ndarray], bool, float]:
    """Checked inputs (q, k, v as float32; cu_seqlens as int32), causal and the scale."""
    missing = [n for n in INPUTS if n not in case.inputs]
    if missing:
        raise ValueError(f"case {case.name!r}: varlen_fwd needs inputs {list(INPUTS)}, missing {missing}")
    unknown = sorted(set(case.inputs) - set(INPUTS))
    if unknown:
        raise ValueError(f"case {case.name!r}: unknown inputs {unknown}; varlen_fwd takes {list(INPUTS)}")
    unknown = sorted(set(case.options) - set(OPTIONS))
    if unknown:
        raise ValueError(f"case {case.name!r}: unknown options {unknown}; varlen_fwd takes {list(OPTIONS)}")
    i = case.inputs
    q, k, v, cu_q, cu_k, _, _ = qkv(i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"])
    if k.shape[1] != q.shape[1]:
        raise ValueError(
            f"k has {k.shape[1]} heads but q has {q.shape[1]}: varlen_fwd has no grouped-query "
            f"attention (GQA), so k/v heads must equal q heads"
        )
    o = _reference.check_varlen_options(q.shape[2], causal=case.options.get("causal", False), scale=case.options.get("scale"))
    return {"q": q, "k": k, "v": v, "cu_seqlens_q": cu_q, "cu_seqlens_k": cu_k}, o.causal, o.scale


@dataclass
class VarlenFwdConfig(LiveConfig):
    """`batch` sequences of seq_q queries and seq_k keys packed token-major ([total, heads, D]);
    with `padding` each sequence keeps a random number of them (0 included: empty sequences and
    rows with no key), sequence 0 at least half. The original kernel's interface: no GQA, window nor softcap."""

    batch: int = knob(2, 1, 256)
    heads: int = knob(4, 1, 256)
    seq_q: int = knob(128, 1, 65536)
    seq_k: int = knob(128, 1, 65536)
    head_dim: int = knob(64, 1, 1024)
    causal: bool = knob(True)
    causal_align: str = knob(
        "top_left", choices=_reference.CAUSAL_ALIGNS, hint="the kernel is top-left; bottom_right fits equal lengths only"
    )
    padding: bool = knob(False, hint="ragged sequence lengths: empty sequences and rows with no key")
    seed: int = knob(0, 0, U32_MAX)

    def check(self) -> None:
        check_size(self.batch, self.heads, self.heads, self.seq_q, self.seq_k, self.head_dim)

    def tensors(self) -> Dict[str, np.ndarray]:
        return draw_packed(self.seed, self.batch, self.heads, self.heads, self.seq_q, self.seq_k, self.head_dim, self.padding)


class _GridRng:
    """varlen_fwd's grid draws each case from (seed, its name); two rows share 40 random lengths."""

    def __init__(self, seed: int):
        self.seed = seed
        lens = np.random.default_rng(seed)
        self.many_q = lens.integers(0, 13, size=40).tolist()
        self.many_k = lens.integers(0, 13, size=40).tolist()


class VarlenFwd(PackedInterface):
    name = "varlen_fwd"
    OUTPUTS = ("out", "lse")
    Config = VarlenFwdConfig

    def band(self, case: Case) -> Tuple[int, int, str, float, float]:
        """The original kernel's: top-left causal, no window, no softcap."""
        d = int(np.shape(case.inputs["q"])[-1])
        o = _reference.check_varlen_options(d, causal=case.options.get("causal", False), scale=case.options.get("scale"))
        return o.left, o.right, "top_left", 0.0, o.scale

    def packed(self, case: Case):
        _check(case)  # its own inputs and options (no GQA, window nor softcap)
        i = case.inputs
        a = _reference.check_varlen_inputs(i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"])
        o = case.options
        return a, _reference.check_varlen_options(a.q.shape[2], causal=o.get("causal", False), scale=o.get("scale"))

    def layout(self, case: Case) -> Layout:
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
        buffers = {name: data_buffer(name, arr) for name, arr in arrays.items()}
        buffers["out"] = out_buffer("out", 4 * total_q * heads * dim)
        buffers["lse"] = out_buffer("lse", 4 * total_q * heads)
        return Layout(
            values, buffers, [Output("out", "out", 0, (total_q, heads, dim)), Output("lse", "lse", 0, (total_q, heads))]
        )

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
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
        self,
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        *,
        alibi_slopes: Any = None,
        sinks: Any = None,
        name: str = "call",
        **keywords: Any,
    ) -> Case:
        """The case computing varlen_attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, ...) on this
        interface; ValueError for what it cannot carry (GQA, a window, softcap, ALiBi, sinks, and a
        bottom-right causal mask on a sequence with len_q != len_k, where the alignments differ)."""
        # The reference's check of every option first (one rule, one message for every entry point;
        # only the default scale depends on D, and _check refuses a bad q), then what this interface
        # cannot carry, then the arrays.
        case_options(np.shape(q)[2] if np.ndim(q) == 3 else 1, keywords)
        given = dict(DEFAULT_OPTIONS, **keywords)
        causal, scale, window, softcap = (given[k] for k in ("causal", "scale", "window", "softcap"))
        if tuple(window) != (-1, -1):
            raise ValueError(f"window={window!r}: varlen_fwd has no sliding window; only (-1, -1) fits")
        if float(softcap) != 0.0:
            raise ValueError(f"softcap={softcap!r}: varlen_fwd has no softcap; only 0 fits")
        for what, value in (("alibi_slopes", alibi_slopes), ("sinks", sinks)):
            if value is not None:
                raise ValueError(f"{what}: varlen_fwd has no ALiBi and no sinks; only None fits")
        case = Case(
            name=name,
            inputs={"q": q, "k": k, "v": v, "cu_seqlens_q": cu_seqlens_q, "cu_seqlens_k": cu_seqlens_k},
            options={"causal": causal, "scale": scale},
        )
        arrays, causal, _ = _check(case)  # shapes, heads (no GQA), cu_seqlens
        if causal and given["causal_align"] == "bottom_right":
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

    # Head dims that cross the kernel's 64-column chunks (1, 59, 64, 111, 128, 130), lengths 1x147,
    # 113x203 and 203x113, rows of 1024 keys and more, batches with empty sequences (no queries, no
    # keys, neither), causal and not, non-default scales; "many": 40 random lengths in 0..12.
    GRID = [
        dict(name="d1-1x147", lens_q=[1], lens_k=[147], heads=2, dim=1),
        dict(name="d64-1x147-causal", lens_q=[1], lens_k=[147], heads=2, dim=64, causal=True),
        dict(name="d59-113x203", lens_q=[113], lens_k=[203], heads=2, dim=59),
        dict(name="d59-113x203-causal", lens_q=[113], lens_k=[203], heads=2, dim=59, causal=True),
        dict(name="d111-203x113", lens_q=[203], lens_k=[113], heads=1, dim=111),
        dict(name="d111-203x113-causal", lens_q=[203], lens_k=[113], heads=2, dim=111, causal=True),
        dict(name="d130-113x203-scale0.37", lens_q=[113], lens_k=[203], heads=1, dim=130, scale=0.37),
        dict(name="d128-96x96-causal-scale-0.11", lens_q=[96], lens_k=[96], heads=2, dim=128, causal=True, scale=-0.11),
        dict(name="d64-48x1100", lens_q=[48], lens_k=[1100], heads=2, dim=64),
        dict(name="d64-1024x1024-causal", lens_q=[1024], lens_k=[1024], heads=1, dim=64, causal=True),
        dict(name="d37-batch7-empty", lens_q=[3, 0, 17, 5, 9, 0, 4], lens_k=[7, 4, 0, 11, 1, 0, 9], heads=3, dim=37),
        dict(
            name="d37-batch7-empty-causal",
            lens_q=[3, 0, 17, 5, 9, 0, 4],
            lens_k=[7, 4, 0, 11, 1, 0, 9],
            heads=3,
            dim=37,
            causal=True,
        ),
        dict(name="d16-batch3-no-keys", lens_q=[4, 0, 6], lens_k=[0, 0, 0], heads=2, dim=16, causal=True),
        dict(name="d59-batch2-no-queries", lens_q=[0, 0], lens_k=[5, 3], heads=1, dim=59),
        dict(name="d8-batch40-causal", lens_q="many", lens_k="many", heads=2, dim=8, causal=True),
        dict(name="d8-batch40", lens_q="many", lens_k="many", heads=1, dim=8, scale=2.5),
    ]

    def grid_rng(self, seed: int) -> Any:
        return _GridRng(seed)

    def grid_case(self, rng, name, lens_q, lens_k, heads, dim, causal=False, scale=None) -> Case:
        """Standard-normal inputs for sequences of these lengths; the data depend on (seed, name)."""
        lens_q = rng.many_q if lens_q == "many" else lens_q
        lens_k = rng.many_k if lens_k == "many" else lens_k
        draw = np.random.default_rng([rng.seed, zlib.crc32(name.encode())])
        cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
        cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
        total_q, total_k = int(cu_q[-1]), int(cu_k[-1])
        return Case(
            name=name,
            inputs={
                "q": draw.standard_normal((total_q, heads, dim), dtype=np.float32),
                "k": draw.standard_normal((total_k, heads, dim), dtype=np.float32),
                "v": draw.standard_normal((total_k, heads, dim), dtype=np.float32),
                "cu_seqlens_q": cu_q,
                "cu_seqlens_k": cu_k,
            },
            options={"causal": causal, "scale": scale},
        )

    def live_case(self, config: VarlenFwdConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        t = tensors
        return self.case_from_reference(
            t["q"],
            t["k"],
            t["v"],
            t["cu_seqlens_q"],
            t["cu_seqlens_k"],
            causal=config.causal,
            causal_align=config.causal_align,
            name=name,
        )


assert I32_MAX < U32_MAX
INTERFACE = VarlenFwd()
