"""What the probability interfaces (attn_probs, attn_probs_batched) share: their grids' score
draws, their live configurations' key history, and their pictures (rows: query positions;
columns: keys of the history), drawn from the reference's own functions and masks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Tuple

import numpy as np

from .. import reference as _reference
from .base import MAX_ELEMENTS, MAX_SCORES
from .config import LiveConfig, knob

__all__ = ["U32_MAX", "I32_MAX", "HistoryConfig", "draw_scores", "draw_history", "check_size", "history_params", "picture"]

U32_MAX = 2**32 - 1
I32_MAX = 2**31 - 1


def draw_scores(
    rng: np.random.RandomState, q_shape: Tuple[int, ...], k_shape: Tuple[int, ...], spread: float, offset: float
) -> Tuple[np.ndarray, np.ndarray]:
    """q and k_hist whose scores are about offset + N(0, spread^2) at any head dim: q is scaled by
    spread / sqrt(D); a nonzero offset comes from coordinate 0 (k_hist 10 there, q offset / 10)."""
    d = q_shape[-1]
    q = (rng.standard_normal(q_shape) * (spread / np.sqrt(max(d - (offset != 0), 1)))).astype(np.float32)
    k = rng.standard_normal(k_shape).astype(np.float32)
    if offset:
        k[..., 0] = 10.0
        q[..., 0] = offset / 10.0
    return q, k


def history_params(heads: int, k_hist: np.ndarray, window: int) -> Dict[str, float]:
    """The Params values both interfaces take alike: the head dim, the heads, the history length
    and the window. A window above a position + 1 sees every key up to it, whatever its size:
    clamping it to u32 changes nothing (position + 1 <= history_len fits in u32)."""
    history_len, heads_kv, head_dim = k_hist.shape
    return {
        "head_dim": head_dim,
        "n_heads": heads,
        "n_kv_heads": heads_kv,
        "heads_per_kv": heads // heads_kv,
        "history_len": history_len,
        "window": min(window, U32_MAX),
    }


def draw_history(seed: int, positions: int, heads: int, heads_kv: int, history: int, head_dim: int) -> Dict[str, np.ndarray]:
    """q [positions, heads, D] (scores about N(0, 1) at scale 1) and k_hist [history, heads_kv, D]."""
    rs = np.random.RandomState(seed)
    q = (rs.standard_normal((positions, heads, head_dim)) / np.sqrt(head_dim)).astype(np.float32)
    k = rs.standard_normal((history, heads_kv, head_dim)).astype(np.float32)
    return {"q": q, "k_hist": k}


@dataclass
class HistoryConfig(LiveConfig):
    """The key history the probability interfaces' live configurations share (their own fields
    follow these)."""

    heads: int = knob(8, 1, 256)
    heads_kv: int = knob(2, 1, 256, hint="key heads (GQA)", divides="heads")
    history: int = knob(256, 1, 1 << 20)
    head_dim: int = knob(64, 1, 1024)


def check_size(positions: int, heads: int, heads_kv: int, history: int, head_dim: int) -> None:
    """A live case within MAX_ELEMENTS (q, k_hist) and MAX_SCORES (probabilities); GQA is the
    configuration's `divides` (wgattn.interfaces.config)."""
    elements = head_dim * (positions * heads + history * heads_kv)
    scores = positions * heads * history
    if elements > MAX_ELEMENTS or scores > MAX_SCORES:
        raise ValueError(
            f"case too large: {elements} elements in q and k_hist (at most {MAX_ELEMENTS}), "
            f"{scores} probabilities (at most {MAX_SCORES})"
        )


def picture(q, k_hist, positions, window: int, scale: float, head: int, max_cells: int) -> Tuple[np.ndarray, np.ndarray, str]:
    """The probabilities of query head `head` ([n_pos, Hq, D] q) for the first positions that fit
    in `max_cells`, from wgattn.reference.attention_probs_batched, and the reference's mask."""
    q = np.asarray(q)
    rows = max(1, min(len(positions), max_cells // k_hist.shape[0]))
    kv = head // (q.shape[1] // k_hist.shape[1])
    pos = np.asarray(positions)[:rows]
    p = _reference.attention_probs_batched(q[:rows, head : head + 1], k_hist[:, kv : kv + 1], pos, window=window, scale=scale)
    visible = _reference.history_mask(pos, k_hist.shape[0], window)
    return p[:, 0, :], visible, "rows: query positions; columns: keys of the history"
