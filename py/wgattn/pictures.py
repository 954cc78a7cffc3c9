"""Pictures of a live run, drawn as RGBA pixels by NumPy (the page only blits them on a canvas).

    heatmap(live, head)          the attention probabilities of one query head from the float64
                                 reference: query rows (sequences stacked, packed sequences as
                                 blocks on the diagonal) by keys; masked keys grey, rows with no
                                 visible key red, probabilities on a perceptual colour scale
    error_map(a, b, allowance)   |a - b| of one output of one head, log colour scale up to the
                                 allowance; elements over it red: a mask-edge bug is a line, a
                                 precision problem noise

Large pictures are max-pooled to at most MAX_SIDE pixels a side, so one wrong element stays
visible. Python 3.8 / numpy 1.17 (the page's Pyodide).
"""

from __future__ import annotations

import base64
from typing import Dict, Tuple

import numpy as np

from . import reference as _ref
from .interfaces import Case, sdpa_arena
from .interfaces._varlen import options as varlen_options

__all__ = ["MAX_SIDE", "probabilities", "heatmap", "error_map", "head_view"]

MAX_SIDE = 512
MAX_CELLS = 1 << 22  # probabilities computed for one picture (32 MiB of float64): later rows are left out
# viridis at nine stops (matplotlib's, public domain): perceptual, readable by colour-blind eyes
_VIRIDIS = np.array(
    [
        [68, 1, 84],
        [71, 44, 122],
        [59, 81, 139],
        [44, 113, 142],
        [33, 144, 141],
        [39, 173, 129],
        [92, 200, 99],
        [170, 220, 50],
        [253, 231, 37],
    ],
    dtype=np.float64,
)
MASKED = (208, 215, 222)  # a key the mask hides
EMPTY = (255, 160, 160)  # a row with no visible key (its output is 0 by contract)
OVER = (207, 34, 46)  # an error above the allowance, or a NaN / mismatched infinity


def _colour(t: np.ndarray) -> np.ndarray:
    """[..] values in [0, 1] -> [.., 3] uint8 on the viridis scale."""
    x = np.clip(t, 0.0, 1.0) * (len(_VIRIDIS) - 1)
    i = np.minimum(np.floor(x).astype(np.int64), len(_VIRIDIS) - 2)
    f = (x - i)[..., None]
    return np.rint(_VIRIDIS[i] * (1 - f) + _VIRIDIS[i + 1] * f).astype(np.uint8)


def _pool(a: np.ndarray, fill: float) -> np.ndarray:
    """Max-pool a 2-D array to at most MAX_SIDE a side (ceil blocks; padding with `fill`)."""
    rows, cols = a.shape
    fr, fc = -(-rows // MAX_SIDE), -(-cols // MAX_SIDE)
    if fr == 1 and fc == 1:
        return a
    out = np.full((-(-rows // fr) * fr, -(-cols // fc) * fc), fill, dtype=a.dtype)
    out[:rows, :cols] = a
    return out.reshape(out.shape[0] // fr, fr, out.shape[1] // fc, fc).max(axis=(1, 3))


def _image(rgb: np.ndarray, **meta) -> Dict[str, object]:
    h, w, _ = rgb.shape
    rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2)
    return dict(meta, width=int(w), height=int(h), rgba=base64.b64encode(rgba.tobytes()).decode("ascii"))


def probabilities(interface: str, case: Case, head: int) -> Tuple[np.ndarray, np.ndarray, str]:
    """(probabilities, visible mask, how rows and columns are laid out) of query head `head`,
    float64, from the reference's own masks and masked softmax."""
    i, o = case.inputs, case.options
    if interface in ("attn_probs", "attn_probs_batched"):
        if interface == "attn_probs":
            p = _ref.attention_probs(i["q"], i["k_hist"], pos=o["pos"], window=o.get("window", 0), scale=1.0)
            p, pos = p[head][None, :], np.array([o["pos"]])
        else:
            # this head alone (and its key head), for the first positions that fit
            rows = max(1, min(len(i["positions"]), MAX_CELLS // i["k_hist"].shape[0]))
            kv = head // (i["q"].shape[1] // i["k_hist"].shape[1])
            p = _ref.attention_probs_batched(
                i["q"][:rows, head : head + 1],
                i["k_hist"][:, kv : kv + 1],
                i["positions"][:rows],
                window=o.get("window", 0),
                scale=o.get("scale", 1.0),
            )[:, 0, :]
            pos = np.asarray(i["positions"])[:rows]
        j = np.arange(p.shape[1])[None, :]
        window = o.get("window", 0)
        visible = (j <= pos[:, None]) & ((window == 0) | (j > pos[:, None] - window))
        return p, visible, "rows: query positions; columns: keys of the history"
    if interface == "sdpa_arena":
        so = sdpa_arena.options(case)
        q, k = i["q"].astype(np.float64), i["k"].astype(np.float64)
        if so.layout == "bshd":
            q, k = q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3)
        sk, d = k.shape[2], q.shape[3]
        sq = max(1, min(q.shape[2], MAX_CELLS // sk))  # the first batches (and queries) that fit
        b = max(1, min(q.shape[0], MAX_CELLS // (sq * sk)))
        q, k = q[:b, :, :sq], k[:b]
        scale = so.scale or 1.0 / np.sqrt(d)
        kind = so.mask_kind
        band = {"none": (-1, -1), "causal": (-1, 0), "padding": (-1, -1), "window": (so.window, 0)}[kind]
        visible = np.broadcast_to(_ref._band_mask(sq, sk, 0, *band), (b, sq, sk))
        if kind == "padding":
            visible = visible & i["mask"][:b].reshape(b, 1, sk)
        s = np.matmul(q[:, head], k[:, head].transpose(0, 2, 1)) * scale
        p, _ = _ref._masked_softmax(s, visible, np.dtype(np.float64))
        shown = "" if (b, sq) == (i["q"].shape[0], i["q"].shape[2]) else f"; only the first {b} batches, {sq} queries fit"
        return (p.reshape(b * sq, sk), visible.reshape(b * sq, sk), "rows: queries (batches stacked%s); columns: keys" % shown)
    # packed sequences: a block per sequence on the diagonal of (total_q, total_k)
    q, k = i["q"].astype(np.float64), i["k"].astype(np.float64)
    cu_q, cu_k = np.asarray(i["cu_seqlens_q"]), np.asarray(i["cu_seqlens_k"])
    d = q.shape[2]
    kv = head // (q.shape[1] // k.shape[1])
    # varlen_fwd (seed A's) has no causal_align option: it is top-left
    left, right, top_left, cap, scale = varlen_options(dict(o, causal_align="top_left") if interface == "varlen_fwd" else o, d)
    align = "top_left" if top_left else "bottom_right"
    n = len(cu_q) - 1  # the first sequences whose block-diagonal picture fits
    while n > 1 and int(cu_q[n]) * int(cu_k[n]) > MAX_CELLS:
        n -= 1
    cu_q, cu_k = cu_q[: n + 1], cu_k[: n + 1]
    rows = max(1, min(int(cu_q[-1]), MAX_CELLS // max(int(cu_k[-1]), 1)))  # one long sequence: its first rows
    p = np.zeros((rows, int(cu_k[-1])))
    visible = np.zeros(p.shape, dtype=bool)
    for bq in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[bq]), int(cu_q[bq + 1]), int(cu_k[bq]), int(cu_k[bq + 1])
        if q1 == q0 or k1 == k0 or q0 >= rows:
            continue
        m = _ref._seq_mask(q1 - q0, k1 - k0, align, left, right)[: rows - q0]
        q1 = q0 + m.shape[0]
        s = q[q0:q1, head] @ k[k0:k1, kv].T * scale
        if cap > 0:
            s = cap * np.tanh(s / cap)
        p[q0:q1, k0:k1], _ = _ref._masked_softmax(s, m, np.dtype(np.float64))
        visible[q0:q1, k0:k1] = m
    whole = n == len(i["cu_seqlens_q"]) - 1 and rows == int(cu_q[-1])
    shown = "" if whole else f"; only the first {n} of {len(i['cu_seqlens_q']) - 1} sequences, {rows} rows fit"
    return p, visible, f"rows: packed queries; columns: packed keys (one block per sequence{shown})"


def heatmap(interface: str, case: Case, head: int) -> Dict[str, object]:
    """The probabilities of `head` as a picture (JSON-able: width, height, base64 rgba, legend)."""
    with np.errstate(under="ignore"):
        p, visible, layout = probabilities(interface, case, head)
    empty = ~visible.any(axis=1)
    # sqrt spreads small probabilities (long rows share mass thinly) over more of the scale
    top = float(p.max()) if p.size else 1.0
    code = np.where(visible, np.sqrt(p / top) if top > 0 else 0.0, -1.0)  # -1: masked
    code[empty, :] = -2.0
    code = _pool(code, -1.0)
    rgb = _colour(np.maximum(code, 0.0))
    rgb[code == -1.0] = MASKED
    rgb[code == -2.0] = EMPTY
    return _image(
        rgb,
        kind="probabilities",
        head=head,
        layout=layout,
        max=top,
        masked=int((~visible).sum()),
        empty_rows=int(empty.sum()),
        legend=f"colour: sqrt(p / {top:.3g}) on viridis; grey: masked key; red row: no visible key",
    )


def head_view(interface: str, case: Case, a: np.ndarray, head: int, heads: int) -> np.ndarray:
    """One query head's slice of an output as a 2-D array (rows x last axis); outputs with k/v
    heads (dk, dv) show the k/v head that query head reads."""
    a = np.asarray(a, dtype=np.float64)
    if interface == "sdpa_arena":  # [B, H, S, D] or [B, S, H, D]
        axis = 2 if case.options.get("layout", "bhsd") == "bshd" else 1
        x = np.take(a, head, axis=axis)
        return x.reshape(-1, x.shape[-1])
    if interface == "attn_probs":  # [Hq, history]
        return a[head][None, :]
    # [total, H, D], [total, H] (lse), [n_pos, Hq, history]
    h = head if a.shape[1] == heads else head // (heads // a.shape[1])
    x = a[:, h]
    return x[:, None] if x.ndim == 1 else x


def error_map(a: np.ndarray, b: np.ndarray, allowance: float) -> Dict[str, object]:
    """|a - b| as a picture: log10 colour from allowance / 1e6 to the allowance, red above it."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    finite = np.isfinite(a) & np.isfinite(b)
    same_inf = np.isinf(a) & (a == b)
    err = np.where(finite, np.abs(np.where(finite, a, 0.0) - np.where(finite, b, 0.0)), 0.0)
    err = np.where(finite | same_inf, err, np.inf)
    worst = float(err.max()) if err.size else 0.0
    over = int((err > allowance).sum())
    lo = allowance * 1e-6
    with np.errstate(divide="ignore"):
        t = (np.log10(np.maximum(err, lo)) - np.log10(lo)) / 6.0
    code = _pool(np.where(err > allowance, 2.0, np.clip(t, 0.0, 1.0)), 0.0)
    rgb = _colour(np.minimum(code, 1.0))
    rgb[code > 1.0] = OVER
    return _image(
        rgb,
        kind="error",
        max_abs_err=worst,
        allowance=allowance,
        over=over,
        legend=f"colour: log10 |a - b| from {lo:.1e} (dark) to the allowance {allowance:.1e} "
        f"(yellow); red: over the allowance ({over} elements)",
    )
