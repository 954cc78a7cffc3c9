"""The `attn_probs_batched` interface: softmax probabilities of many query positions over one key
history in one dispatch (what a training backward that rebuilds the probabilities needs), Gemma
style by default, with GQA, a sliding window and a score scale; 32 bytes of params
(shaders/interfaces/attn_probs_batched.wgsl).

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Tuple

import numpy as np

from .. import reference as _reference
from ..plan import Output
from ._probs import I32_MAX, U32_MAX, HistoryConfig, check_size, draw_history, draw_scores, history_params, picture
from .base import Case, Interface, Layout, data_buffer, out_buffer
from .config import knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "AttnProbsBatched", "AttnProbsBatchedConfig"]

INPUTS = ("q", "k_hist", "positions")
_OPTIONS = ("window", "scale")


def _validate(q: object, k_hist: object, positions: object, window: object, scale: object):
    """float32 q and k_hist, int64 positions, window and scale, checked by the reference's
    checkers, then against the kernels' index arithmetic (u32 indices, i32 positions)."""
    q, k_hist, pos, window, _ = _reference.check_probs_batched_inputs(q, k_hist, positions, window)
    n_pos, hq, d = q.shape
    history_len, hkv, _ = k_hist.shape
    scale = _reference.check_scale(scale, d)
    if history_len > I32_MAX:
        raise ValueError(f"history_len must fit in i32 (positions travel as int32), got {history_len}")
    if n_pos * hq * history_len > U32_MAX or max(n_pos * hq, history_len * hkv) * (-(-d // 4)) > U32_MAX:
        raise ValueError(
            f"q ({q.shape}), k_hist ({k_hist.shape}) or probs ([{n_pos}, {hq}, {history_len}]) "
            "is too large: element indices must fit in u32"
        )
    return np.ascontiguousarray(q, dtype=np.float32), np.ascontiguousarray(k_hist, dtype=np.float32), pos, window, scale


def _case_args(case: Case) -> Tuple[np.ndarray, np.ndarray, np.ndarray, int, float]:
    unknown = sorted(set(case.options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"attn_probs_batched options are {list(_OPTIONS)}, got unknown {unknown}")
    missing = [name for name in INPUTS if case.inputs.get(name) is None]
    if missing:
        raise ValueError(f"attn_probs_batched needs inputs {list(INPUTS)}, missing {missing}")
    i, o = case.inputs, case.options
    return _validate(i["q"], i["k_hist"], i["positions"], o.get("window", 0), o.get("scale", 1.0))


def _vec4_rows(a: np.ndarray) -> np.ndarray:
    """[..., D] float32 -> [..., ceil(D / 4) * 4], zero-padded (the kernels' vec4 rows)."""
    d = a.shape[-1]
    pad = -d % 4
    if pad == 0:
        return a
    out = np.zeros(a.shape[:-1] + (d + pad,), dtype=np.float32)
    out[..., :d] = a
    return out


@dataclass
class AttnProbsBatchedConfig(HistoryConfig):
    """Probabilities of the last `positions` positions of a key history of `history` keys, each
    over the keys up to it (and within `window` keys of it)."""

    positions: int = knob(64, 1, 1 << 20, hint="query positions: the last ones of the history (at most history)")
    window: int = knob(0, 0, 2**31 - 1, sentinels={0: "unbounded"}, hint="visible keys counting the current one")
    scale: float = knob(1.0, f32="scale", hint="scores are scale * q.k (q is drawn with 1/sqrt(D) already)")
    seed: int = knob(0, 0, U32_MAX)

    def check(self) -> None:
        if self.positions > self.history:
            raise ValueError(f"positions must be an integer in 1..{self.history}, got {self.positions!r}")
        check_size(self.positions, self.heads, self.heads_kv, self.history, self.head_dim)

    def tensors(self) -> Dict[str, np.ndarray]:
        return draw_history(self.seed, self.positions, self.heads, self.heads_kv, self.history, self.head_dim)


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


class AttnProbsBatched(Interface):
    name = "attn_probs_batched"
    OUTPUTS = ("probs",)
    Config = AttnProbsBatchedConfig
    bench_op = "probs"

    def layout(self, case: Case) -> Layout:
        q, k_hist, pos, window, scale = _case_args(case)
        n_pos, hq, _ = q.shape
        history_len = k_hist.shape[0]
        values = {**history_params(hq, k_hist, window), "n_pos": n_pos, "scale": scale}
        buffers = {
            "q": data_buffer("q", _vec4_rows(q)),
            "k_hist": data_buffer("k_hist", _vec4_rows(k_hist)),
            "positions": data_buffer("positions", pos.astype(np.uint32)),
            "probs": out_buffer("probs", 4 * n_pos * hq * history_len),
        }
        return Layout(values, buffers, [Output("probs", "probs", 0, (n_pos, hq, history_len))])

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.attention_probs_batched on the case (dtype float32: the naive float32 run)."""
        q, k_hist, pos, window, scale = _case_args(case)
        return {"probs": _reference.attention_probs_batched(q, k_hist, pos, window=window, scale=scale, dtype=dtype)}

    def case_from_reference(self, q, k_hist, positions, *, window=0, scale=1.0, name: str = "call") -> Case:
        """The case running attention_probs_batched(q, k_hist, positions, window=, scale=) on this
        interface (ValueError naming a bad argument). scale None is 1/sqrt(D), as in the reference;
        the case carries it as a float."""
        q, k_hist, pos, window, scale = _validate(q, k_hist, positions, window, scale)
        return Case(name, {"q": q, "k_hist": k_hist, "positions": pos.astype(np.int32)}, {"window": window, "scale": scale})

    # History lengths 1, 5, 63, 64, 65, 4096, 5000 and 20000 (> 16384); head dims 1, 7, 32, 59, 64,
    # 111, 128 and 256; GQA ratios 1, 2, 3 (6 heads on 2), 4 and MQA; windows 0, 1, small, in
    # between, wider than 4096 and larger than every p + 1; positions at 0 and at history_len - 1,
    # in any order, repeated, one position for every row (`_positions`); a scale of 1/8 and a
    # negative one; scores around +100 and -100, peaked rows and all-equal scores (draw_scores).
    GRID = [
        dict(n_pos=1, hq=1, hkv=1, d=1, history_len=1, kind="tail", window=0),  # a single key: probability 1
        dict(n_pos=5, hq=2, hkv=2, d=1, history_len=5, kind="random", window=0),  # head dim 1, repeats likely
        dict(n_pos=9, hq=4, hkv=1, d=7, history_len=63, kind="edges", window=0),  # head dim 7 (padded to 8), MQA
        dict(n_pos=7, hq=4, hkv=2, d=64, history_len=64, kind="edges", window=1),  # window 1: only key p
        dict(n_pos=6, hq=8, hkv=2, d=128, history_len=65, kind="random", window=5, scale=0.125),  # GQA 4, scaled
        dict(n_pos=4, hq=2, hkv=2, d=256, history_len=65, kind="edges", window=100),  # window > every p + 1, d 256
        dict(n_pos=11, hq=6, hkv=3, d=64, history_len=203, kind="tail", window=0),  # n_pos * group not a multiple of 4
        dict(n_pos=8, hq=3, hkv=3, d=64, history_len=130, kind="same", window=0),  # one position repeated
        dict(n_pos=5, hq=4, hkv=4, d=64, history_len=300, kind="random", window=37),  # window in between, any order
        dict(n_pos=3, hq=2, hkv=1, d=59, history_len=300, kind="edges", window=300),  # window == history_len
        dict(n_pos=16, hq=4, hkv=4, d=64, history_len=4096, kind="tail", window=0),  # the benchmark's job, smaller
        dict(n_pos=6, hq=4, hkv=1, d=128, history_len=5000, kind="random", window=4097),  # past attn_probs' original 4096
        dict(n_pos=4, hq=2, hkv=2, d=64, history_len=20000, kind="edges", window=0),  # long: over 16384 keys
        dict(n_pos=6, hq=4, hkv=2, d=111, history_len=1000, kind="random", window=0, spread=0.5, offset=100.0),
        dict(n_pos=4, hq=4, hkv=1, d=64, history_len=300, kind="tail", window=0, spread=0.5, offset=-100.0),
        dict(n_pos=6, hq=4, hkv=2, d=64, history_len=1000, kind="random", window=0, spread=100.0),  # peaked rows
        dict(n_pos=4, hq=2, hkv=1, d=64, history_len=500, kind="random", window=0, scale=-0.5, spread=4.0),  # negative scale
        dict(n_pos=5, hq=2, hkv=2, d=32, history_len=200, kind="tail", window=0, spread=0.0),  # all scores 0
    ]

    def grid_rng(self, seed: int) -> np.random.RandomState:
        return np.random.RandomState(seed + 20240611)

    def grid_case(self, rng, n_pos, hq, hkv, d, history_len, kind, window, scale=1.0, spread=1.0, offset=0.0) -> Case:
        q, k = draw_scores(rng, (n_pos, hq, d), (history_len, hkv, d), spread, offset)
        pos = _positions(rng, kind, n_pos, history_len)
        name = f"np{n_pos}-hq{hq}-kv{hkv}-d{d}-n{history_len}-{kind}-w{window}"
        if scale != 1.0:
            name += f"-sc{scale:g}"
        if spread != 1.0:
            name += f"-sd{spread:g}"  # score spread
        if offset:
            name += f"-off{offset:+g}"  # score offset
        return self.case_from_reference(q, k, pos, window=window, scale=scale, name=name)

    def live_case(self, config: AttnProbsBatchedConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        positions = np.arange(config.history - config.positions, config.history)
        return self.case_from_reference(
            tensors["q"], tensors["k_hist"], positions, window=config.window, scale=config.scale, name=name
        )

    def bench_cases(self, dense: Mapping[str, np.ndarray], causal: bool) -> List[Case]:
        """Every position (the last B of the history) in one dispatch."""
        b, s = dense["q"].shape[0], dense["k_hist"].shape[0]
        return [self.case_from_reference(dense["q"], dense["k_hist"], positions=np.arange(s - b, s))]

    def output_axes(self, case: Case, output: str, ndim: int) -> List[str]:
        """probs [positions, Hq, history]."""
        return ["query position", "head", "key"][:ndim]

    def probability_axes(self, case: Case) -> Tuple[str, str]:
        return "query position", "key"

    def probabilities(self, case: Case, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
        q, k_hist, pos, window, scale = _case_args(case)
        return picture(q, k_hist, pos, window, scale, head, max_cells)


INTERFACE = AttnProbsBatched()
