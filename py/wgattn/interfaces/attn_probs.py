"""The `attn_probs` interface (the original attn_probs kernel's): softmax probabilities of one query position over a key
history, Gemma style (un-scaled scores), with GQA and a sliding window; 32 bytes of params
(shaders/interfaces/attn_probs.wgsl).

    q:      [Hq, D], float32 (the current token's query heads)
    k_hist: [history_len, Hkv, D], float32 (the key cache; the sequence is the slow axis)
    probs:  [Hq, history_len]

case.options: pos (0 <= pos < history_len, the current token's position) and window (>= 0: the
number of visible keys including the current one, 0 unbounded). Query head h reads key head
h // (Hq // Hkv). The interface has no scale: scores are plain dot products.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Tuple

import numpy as np

from .. import reference as _reference
from ..plan import Output
from ._probs import U32_MAX, HistoryConfig, check_size, draw_history, draw_scores, history_params, picture
from .base import Case, Interface, Layout, data_buffer, out_buffer
from .config import knob

if TYPE_CHECKING:  # numpy.typing is newer than the page's numpy 1.17: for annotations only
    from numpy.typing import DTypeLike

__all__ = ["INTERFACE", "AttnProbs", "AttnProbsConfig"]

_OPTIONS = ("pos", "window")


def _case_args(case: Case) -> Tuple[np.ndarray, np.ndarray, int, int]:
    """float32 q and k_hist, pos and window, checked by wgattn.reference.check_probs_inputs."""
    unknown = sorted(set(case.options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"attn_probs options are {list(_OPTIONS)}, got unknown {unknown}")
    missing = sorted({"q", "k_hist"} - set(case.inputs))
    if missing:
        raise ValueError(f"attn_probs needs inputs q and k_hist, missing {missing}")
    if "pos" not in case.options:
        raise ValueError("pos must be given (an integer in [0, history_len))")
    q, k, pos, window, _ = _reference.check_probs_inputs(
        case.inputs["q"], case.inputs["k_hist"], case.options["pos"], case.options.get("window", 0)
    )
    return np.ascontiguousarray(q, dtype=np.float32), np.ascontiguousarray(k, dtype=np.float32), pos, window


@dataclass
class AttnProbsConfig(HistoryConfig):
    """The probabilities of the last position of a key history of `history` keys, over the keys
    up to it (and within `window` keys of it)."""

    window: int = knob(0, 0, 2**31 - 1, sentinels={0: "unbounded"}, hint="visible keys counting the current one")
    seed: int = knob(0, 0, U32_MAX)

    def check(self) -> None:
        check_size(1, self.heads, self.heads_kv, self.history, self.head_dim)

    def tensors(self) -> Dict[str, np.ndarray]:
        """q [1, heads, D] (one position: attn_probs takes one per dispatch), k_hist [history, heads_kv, D]."""
        return draw_history(self.seed, 1, self.heads, self.heads_kv, self.history, self.head_dim)


class AttnProbs(Interface):
    name = "attn_probs"
    OUTPUTS = ("probs",)
    Config = AttnProbsConfig
    bench_op = "probs"

    def layout(self, case: Case) -> Layout:
        q, k_hist, pos, window = _case_args(case)
        hq = q.shape[0]
        history_len = k_hist.shape[0]
        values = {**history_params(hq, k_hist, window), "pos": pos}
        buffers = {
            "q": data_buffer("q", q),
            "k_hist": data_buffer("k_hist", k_hist),
            "probs": out_buffer("probs", 4 * hq * history_len),
        }
        return Layout(values, buffers, [Output("probs", "probs", 0, (hq, history_len))])

    def reference(self, case: Case, dtype: "DTypeLike" = np.float64) -> Dict[str, np.ndarray]:
        """wgattn.reference.attention_probs with scale 1 (the interface's un-scaled scores)."""
        q, k_hist, pos, window = _case_args(case)
        return {"probs": _reference.attention_probs(q, k_hist, pos=pos, window=window, scale=1.0, dtype=dtype)}

    def case_from_reference(self, q, k_hist, *, pos, window=0, scale=1.0, name: str = "call") -> Case:
        """The case running attention_probs(q, k_hist, pos=, window=, scale=) on this interface,
        which computes un-scaled scores: any scale other than 1 (None is 1/sqrt(D)) is refused."""
        q, k_hist, pos, window, _ = _reference.check_probs_inputs(q, k_hist, pos, window)
        if _reference.check_scale(scale, q.shape[1]) != 1.0:  # the reference's rule first, then this interface's
            raise ValueError(
                f"scale must be 1.0 for attn_probs, whose scores are un-scaled q.k; got scale={scale!r} "
                "(pass scale=1.0, or multiply q by the scale beforehand)"
            )
        q32, k32 = np.ascontiguousarray(q, dtype=np.float32), np.ascontiguousarray(k_hist, dtype=np.float32)
        return Case(name, {"q": q32, "k_hist": k32}, {"pos": pos, "window": window})

    # Head dims 1 to 256; GQA ratios 1, 3 and all-to-one; history lengths 1, under, just over and
    # many times WG, past the original kernel's 4096 and long (70000); pos at 0, in the middle (later keys get
    # exactly 0) and at the end; window 0, 1, exactly pos + 1, above pos + 1, in between; scores
    # around +100 (exp overflows float32 without the maximum subtracted) and -100 (exp
    # underflows); a peaked row; all scores equal. spread and offset shape the scores (draw_scores).
    GRID = [
        dict(hq=1, hkv=1, d=1, history_len=1, pos=0, window=0),  # a single key: probability 1
        dict(hq=2, hkv=2, d=1, history_len=203, pos=202, window=0),  # head dim 1, pos at the end
        dict(hq=4, hkv=4, d=64, history_len=63, pos=62, window=0),  # fewer keys than WG
        dict(hq=6, hkv=2, d=59, history_len=65, pos=0, window=0),  # pos 0: only key 0 visible
        dict(hq=6, hkv=2, d=111, history_len=203, pos=100, window=0),  # pos in the middle, window 0
        dict(hq=8, hkv=1, d=256, history_len=203, pos=202, window=1),  # window 1: only key pos
        dict(hq=3, hkv=1, d=64, history_len=65, pos=40, window=41),  # window exactly pos + 1
        dict(hq=4, hkv=4, d=59, history_len=63, pos=30, window=50),  # window larger than pos + 1
        dict(hq=6, hkv=2, d=64, history_len=203, pos=150, window=37),  # window in between
        dict(hq=3, hkv=3, d=256, history_len=129, pos=128, window=64, spread=2.0),  # window == WG, head dim 256
        dict(hq=6, hkv=2, d=64, history_len=5000, pos=4999, window=0),  # past the original kernel's 4096 scores
        dict(hq=3, hkv=1, d=111, history_len=5000, pos=4200, window=4097),  # a window wider than 4096
        dict(hq=2, hkv=1, d=64, history_len=70000, pos=65536, window=0),  # long: over 1000 keys per invocation
        dict(hq=6, hkv=2, d=111, history_len=1000, pos=700, window=0, spread=0.5, offset=100.0),  # exp(s) overflows f32
        dict(hq=4, hkv=1, d=64, history_len=300, pos=299, window=0, spread=0.5, offset=-100.0),  # exp(s) underflows
        dict(hq=4, hkv=2, d=64, history_len=1000, pos=999, window=0, spread=8.0),  # peaked rows
        dict(hq=9, hkv=3, d=32, history_len=300, pos=299, window=299, spread=0.0),  # all scores 0
    ]

    def grid_rng(self, seed: int) -> np.random.RandomState:
        return np.random.RandomState(seed + 20240601)

    def grid_case(self, rng, hq, hkv, d, history_len, pos, window, spread=1.0, offset=0.0) -> Case:
        q, k = draw_scores(rng, (hq, d), (history_len, hkv, d), spread, offset)
        name = f"hq{hq}-kv{hkv}-d{d}-n{history_len}-pos{pos}-w{window}"
        if spread != 1.0:
            name += f"-sd{spread:g}"  # score spread
        if offset:
            name += f"-off{offset:+g}"  # score offset
        return self.case_from_reference(q, k, pos=pos, window=window, name=name)

    def live_case(self, config: AttnProbsConfig, tensors: Mapping[str, np.ndarray], name: str) -> Case:
        return self.case_from_reference(
            tensors["q"][0], tensors["k_hist"], pos=config.history - 1, window=config.window, name=name
        )

    def bench_cases(self, dense: Mapping[str, np.ndarray], causal: bool) -> List[Case]:
        """One case per position (the last B of the history): attn_probs takes one per dispatch."""
        b, s = dense["q"].shape[0], dense["k_hist"].shape[0]
        return [self.case_from_reference(dense["q"][p], dense["k_hist"], pos=s - b + p) for p in range(b)]

    def bench_plans(self, shape) -> int:
        return int(shape[0])

    def probabilities(self, case: Case, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
        q, k_hist, pos, window = _case_args(case)
        return picture(q[None], k_hist, [pos], window, 1.0, head, max_cells)

    def output_axes(self, case: Case, output: str, ndim: int) -> List[str]:
        """probs [Hq, history]."""
        return ["head", "key"][:ndim]

    def view_axes(self, case: Case, output: str, ndim: int) -> Tuple[str, str]:
        return "the head's one position", "key"

    def probability_axes(self, case: Case) -> Tuple[str, str]:
        return "query position", "key"

    def head_view(self, case: Case, output: np.ndarray, head: int, heads: int) -> np.ndarray:
        """[Hq, history]: one row."""
        return np.asarray(output, dtype=np.float64)[head][None, :]


INTERFACE = AttnProbs()
