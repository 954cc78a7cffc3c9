"""Pictures of a live run, drawn as RGBA pixels by NumPy (the page only blits them on a canvas).

    heatmap(interface, case, head)   the attention probabilities of one query head from the float64
                                 reference, as the interface lays them out (Interface.probabilities:
                                 query rows, packed sequences as blocks on the diagonal, by keys);
                                 masked keys grey, rows with no visible key red, probabilities on a
                                 perceptual colour scale; where a head has few rows (decode), every
                                 head's rows, grouped by head (Interface.picture_heads)
    error_map(a, b, allowance)   |a - b| of one output of one head (Interface.head_view), log colour scale up to the
                                 allowance; elements over it red, identical ones (|a - b| = 0) white
                                 (apart from the smallest errors, dark): a mask-edge bug is a line, a
                                 precision problem noise

Each picture says what its rows and columns run over (`rows_axis`, `cols_axis`).

Large pictures are max-pooled to at most MAX_SIDE pixels a side, so one wrong element stays
visible. Python 3.8 / numpy 1.17 (the page's Pyodide).
"""

from __future__ import annotations

import base64
from typing import Any, Dict, List, Tuple, TypedDict, cast

import numpy as np

from .interfaces import Case, Interface

__all__ = ["MAX_SIDE", "MAX_CELLS", "Heatmap", "ErrorPicture", "heatmap", "error_map", "IDENTICAL"]


class _Pixels(TypedDict):
    width: int
    height: int
    rgba: str  # base64 of width * height RGBA bytes
    legend: str
    rows: int  # the values drawn, before pooling: rows (top to bottom) ...
    cols: int  # ... and columns (left to right)
    colours: List[str]  # the colour bar, bottom to top of the scale: CSS colours at even steps
    ticks: List[Tuple[float, str]]  # the colour bar's labels: (position 0..1 on it, value)
    keys: List[Tuple[str, str]]  # colours outside the scale: (CSS colour, what it means)
    rows_axis: str  # what the rows run over ("query (batches stacked)")
    cols_axis: str  # ... and the columns ("key"; "" for a single column)


class Heatmap(_Pixels):
    """heatmap(): a query head's probabilities, and what the picture shows."""

    kind: str  # "probabilities"
    head: int
    layout: str  # how rows and columns are laid out
    max: float  # the largest probability
    top: float  # the colour scale's top: a high percentile of the visible probabilities
    masked: int  # keys the masks hide
    empty_rows: int  # rows with no visible key
    heads: List[int]  # the query heads shown: one, or every head's rows in groups
    groups: List[Tuple[str, int, int]]  # (label, first row, end row) of each group of rows ([] for one head)


class _ErrorPicture(_Pixels):
    kind: str  # "error"
    max_abs_err: float
    allowance: float
    over: int  # elements over the allowance
    identical: int  # elements where |a - b| = 0


class ErrorPicture(_ErrorPicture, total=False):
    """error_map(): |a - b| of one output; the page's session adds which output, runtimes and head."""

    output: str
    a: str
    b: str
    head: int


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
IDENTICAL = (255, 255, 255)  # |a - b| = 0: apart from the smallest errors, which are dark


def _css(rgb) -> str:
    return "#%02x%02x%02x" % tuple(int(c) for c in rgb)


COLOURS = [_css(c) for c in _VIRIDIS]  # the colour bar of both pictures
TOP_PERCENTILE = 99.0


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


def _image(rgb: np.ndarray, **meta) -> Dict[str, Any]:
    h, w, _ = rgb.shape
    rgba = np.concatenate([rgb, np.full((h, w, 1), 255, np.uint8)], axis=2)
    return dict(meta, width=int(w), height=int(h), rgba=base64.b64encode(rgba.tobytes()).decode("ascii"))


def heatmap(interface: Interface, case: Case, head: int, heads: int = 1) -> Heatmap:
    """The probabilities of `head` (the interface's, Interface.probabilities: from the reference's
    own masks and softmax) as a picture (JSON-able: width, height, base64 rgba, legend); of every
    head Interface.picture_heads names (of `heads`), their rows grouped by head."""
    shown_heads = interface.picture_heads(case, head, heads)
    parts: List[Tuple[np.ndarray, np.ndarray]] = []
    groups: List[Tuple[str, int, int]] = []
    with np.errstate(under="ignore"):
        for h in shown_heads:
            budget = MAX_CELLS // len(shown_heads)
            p, visible, layout = interface.probabilities(case, h, budget)
            start = sum(x[0].shape[0] for x in parts)
            parts.append((p, visible))
            groups.append(("head %d" % h, start, start + p.shape[0]))
    cols = max(x[0].shape[1] for x in parts)
    wide = lambda a, v: np.pad(a, ((0, 0), (0, cols - a.shape[1])), constant_values=v)  # noqa: E731
    p = np.concatenate([wide(x[0], 0.0) for x in parts])
    visible = np.concatenate([wide(x[1], False) for x in parts])
    if len(shown_heads) > 1:
        layout = f"every query head's rows, grouped by head ({layout})"
    empty = ~visible.any(axis=1)
    # The scale's top is a high percentile of the visible probabilities, not their maximum: a row
    # that sees one key (the first of a causal mask) has probability 1 and would leave every longer
    # row dark. Brighter cells clip to the top colour. sqrt spreads the small ones over the scale.
    shown = p[visible]
    most = float(shown.max()) if shown.size else 0.0
    top = float(np.percentile(shown, TOP_PERCENTILE)) if shown.size else 1.0
    top = top if top > 0 else (most or 1.0)
    code = np.where(visible, np.sqrt(np.minimum(p / top, 1.0)), -1.0)  # -1: masked
    code[empty, :] = -2.0
    rows, cols = code.shape
    code = _pool(code, -1.0)
    rgb = _colour(np.maximum(code, 0.0))
    rgb[code == -1.0] = MASKED
    rgb[code == -2.0] = EMPTY
    clipped = ">= " if most > top else ""
    ticks = [
        (t, ("%s%.2g" if t == 1.0 else "%.2g") % ((clipped, top) if t == 1.0 else (top * t * t,)))
        for t in (0.0, 0.25, 0.5, 0.75, 1.0)
    ]
    return cast(
        Heatmap,
        _image(
            rgb,
            kind="probabilities",
            head=head,
            heads=shown_heads,
            groups=groups if len(shown_heads) > 1 else [],
            rows_axis=interface.probability_axes(case)[0],
            cols_axis=interface.probability_axes(case)[1],
            layout=layout,
            max=most,
            top=top,
            masked=int((~visible).sum()),
            empty_rows=int(empty.sum()),
            rows=rows,
            cols=cols,
            colours=COLOURS,
            ticks=ticks,
            keys=[(_css(MASKED), "masked key"), (_css(EMPTY), "row with no visible key")],
            legend=f"colour: probability, square-root scale up to {top:.3g} (the {TOP_PERCENTILE:g}th percentile; "
            f"the largest is {most:.3g}); grey: masked key; red row: no visible key",
        ),
    )


def error_map(a: np.ndarray, b: np.ndarray, allowance: float, axes: Tuple[str, str] = ("row", "column")) -> ErrorPicture:
    """|a - b| as a picture: log10 colour from allowance / 1e6 to the allowance, red above it,
    white where they are identical (|a - b| = 0); `axes` name what its rows and columns run over."""
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
    rows, cols = err.shape if err.ndim == 2 else (err.size, 1)
    # -1: identical (a pooled block only if all of it is), 0..1 the log scale, 2 over the allowance
    code = np.where(err > allowance, 2.0, np.where(err == 0, -1.0, np.clip(t, 0.0, 1.0)))
    code = _pool(code.reshape(rows, cols), -1.0)
    rgb = _colour(np.clip(code, 0.0, 1.0))
    rgb[code > 1.0] = OVER
    rgb[code == -1.0] = IDENTICAL
    identical = int((err == 0).sum())
    return cast(
        ErrorPicture,
        _image(
            rgb,
            kind="error",
            max_abs_err=worst,
            allowance=allowance,
            over=over,
            identical=identical,
            rows=rows,
            cols=cols,
            rows_axis=axes[0],
            cols_axis=axes[1],
            colours=COLOURS,
            ticks=[(k / 6.0, "%.0e" % (lo * 10.0**k)) for k in range(0, 7, 2)],
            keys=[(_css(IDENTICAL), "identical (|a − b| = 0)"), (_css(OVER), "over the allowance")],
            legend=f"colour: log10 |a - b| from {lo:.1e} (dark; smaller errors too) to the allowance {allowance:.1e} "
            f"(yellow); white: identical ({identical} of {err.size} elements); red: over the allowance ({over} elements)",
        ),
    )
