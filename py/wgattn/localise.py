"""Where a runtime and the reference disagree, and the likely why.

`localise(case, output, got, ref, allowance)` describes one output that failed the tolerance
rule: its worst elements (index, and for the packed variable-length interfaces the sequence,
row, head and the key or query range that element sums over; every element named by the output's
axes, Interface.output_axes), a coarse |error| map (max |error| / allowance per head and block of
queries or tokens, the axes it groups named), and a likely class:

- "mask edge": the worst error sits where an element sums over nothing (a row with no visible
  key, a key no query sees), a side is not finite, or the error is too large (over 1e-3 of the
  output's scale) for any float32 rounding: a wrong set of terms;
- "summation order" (tested after a named suspect): the error grows with the number of terms an
  element sums (rank correlation over rows >= 0.5), as a sequential float32 sum's does;
- "built-in precision": the error is spread over many rows and the kernel calls a built-in that
  the adapter's precision probe found far off (the caller names these suspects), or, with no
  suspect, spread over many rows or worst where an element sums the fewest terms (each term
  weighs most there): a shift of every score gives that;
- "localised": a few elements only; read the worst elements.

The classes are heuristics, said as such; the evidence (correlation, spread) comes with them.
Runs on Python 3.8 with numpy 1.17 (the page judges its grid under Pyodide).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, TypedDict, cast

import numpy as np

if TYPE_CHECKING:
    from .interfaces import Interface


class _Element(TypedDict):
    index: List[int]
    got: float
    ref: float
    err: float


class WorstElement(_Element, total=False):
    """One of the worst elements; in a packed case also where it sits: its sequence, its row (or,
    for an output by keys, its key), head and column, and the visible partners it sums over."""

    sequence: int
    row: int
    key: int
    head: int
    column: int
    keys: List[int]  # [first, last] visible key of a row
    queries: List[int]  # [first, last] query that sees a key
    terms: int


class ErrorMap(TypedDict):
    rows: str  # the axis the map's rows run over ("head"; the first axis where the output has none)
    blocks_of: str  # the axis its columns are blocks of ("query", "query token", ...)
    blocks: List[List[int]]  # [first, end) of each block of that axis
    ratio: List[List[float]]  # max |error| / allowance over the other axes, [row][block]


class Localisation(TypedDict):
    """Where one output is wrong: its worst elements (index, got, ref, err, and for packed cases
    the sequence, row or key, head and visible partners), the |error| map and a likely class."""

    output: str
    axes: List[str]  # what each axis of the output runs over (a worst element's index follows them)
    likely: str
    evidence: List[str]
    worst: List[WorstElement]
    map: Optional[ErrorMap]


__all__ = ["localise", "CLASSES"]

CLASSES = ("mask edge", "summation order", "built-in precision", "localised")
WORST = 5  # elements listed
MAP_BLOCKS = 8  # row blocks per head in the error map
GROSS = 1e-3  # an error above this fraction of the output's scale is no float32 rounding


def _abs_err(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """|got - ref| elementwise; matching infinities are 0, any other non-finite value inf."""
    g = np.asarray(got, dtype=np.float64)
    r = np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(g) & np.isfinite(r)
    same_inf = np.isinf(g) & (g == r)
    diff = np.abs(np.where(finite, g, 0.0) - np.where(finite, r, 0.0))
    return np.where(finite, diff, np.where(same_inf, 0.0, np.inf))


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    r = np.empty(len(x), dtype=np.float64)
    r[order] = np.arange(len(x), dtype=np.float64)
    # ties share their mean rank
    vals = x[order]
    start = 0
    for i in range(1, len(x) + 1):
        if i == len(x) or vals[i] != vals[start]:
            r[order[start:i]] = (start + i - 1) / 2.0
            start = i
    return r


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 3 or np.all(x == x[0]) or np.all(y == y[0]):
        return 0.0
    rx, ry = _ranks(np.asarray(x, dtype=np.float64)), _ranks(np.asarray(y, dtype=np.float64))
    rx -= rx.mean()
    ry -= ry.mean()
    return float((rx * ry).sum() / np.sqrt((rx * rx).sum() * (ry * ry).sum()))


# The axis a map's columns are blocks of: the first of these the output has (else its first axis
# that is not a head's).
_ALONG = ("query", "query token", "key token", "query position", "sequence", "token", "key")


def _error_map(err: np.ndarray, axes: Sequence[str], allowance: float) -> ErrorMap:
    """Max |error| / allowance per head (the map's rows; the first axis where there is no head
    axis) and block of queries or tokens (its columns), over every other axis."""
    heads = [i for i, a in enumerate(axes) if "head" in a]
    along = [i for name in _ALONG for i, a in enumerate(axes) if a == name]
    row_axis = heads[0] if heads else 0
    rest = [i for i in range(err.ndim) if i != row_axis]
    block_axis = next((i for i in along if i != row_axis), rest[0] if rest else row_axis)
    others = tuple(i for i in range(err.ndim) if i not in (row_axis, block_axis))
    per = err.max(axis=others) if others else err  # [row_axis, block_axis] in their order
    if per.ndim == 1:
        per = per[:, None]
    elif row_axis > block_axis:
        per = per.T
    n = per.shape[1]
    blocks = max(1, min(MAP_BLOCKS, n))
    edges = np.linspace(0, n, blocks + 1).astype(int)
    grid = [
        [float(per[h, a:b].max()) / allowance if b > a and allowance > 0 else 0.0 for a, b in zip(edges[:-1], edges[1:])]
        for h in range(per.shape[0])
    ]
    return {
        "rows": axes[row_axis] if axes else "row",
        "blocks_of": axes[block_axis] if block_axis != row_axis else "",
        "blocks": [[int(a), int(b)] for a, b in zip(edges[:-1], edges[1:])],
        "ratio": grid,
    }


def localise(
    case,
    output: str,
    got: np.ndarray,
    ref: np.ndarray,
    allowance: float,
    suspects: Sequence[str] = (),
    worst: int = WORST,
    interface: "Optional[Interface]" = None,
) -> Localisation:
    """{output, worst: [{index, got, ref, err, ...}], map, likely, evidence} for one output.
    `suspects`: built-ins the kernel calls that the runtime's precision probe found far off
    (e.g. "tanh: 687971 ulps"); a broad error with a suspect is put down to built-in precision.
    `interface`: the case's, whose geometry (a packed case's sequences and visible partners,
    Interface.geometry) names where each element sits."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    axes = interface.output_axes(case, output, ref.ndim) if interface is not None else [f"axis {i}" for i in range(ref.ndim)]
    if got.shape != ref.shape:
        return {
            "output": output,
            "axes": axes,
            "likely": "mask edge" if got.size == 0 else "localised",
            "evidence": [f"shape {list(got.shape)} instead of {list(ref.shape)}"],
            "worst": [],
            "map": None,
        }
    err = _abs_err(got, ref)
    flat = err.ravel()
    n = min(worst, flat.size)
    top = np.argsort(-flat, kind="mergesort")[:n]
    geo = interface.geometry(case, output, ref.shape) if interface is not None else None
    items: List[WorstElement] = []
    for f in top:
        idx = tuple(int(i) for i in np.unravel_index(int(f), ref.shape))
        item: Dict[str, Any] = {"index": list(idx), "got": float(got.flat[f]), "ref": float(ref.flat[f]), "err": float(flat[f])}
        if geo is not None:
            t = idx[0]
            item.update(
                {
                    "sequence": int(geo["seq"][t]),
                    geo["row"]: int(geo["pos"][t]),  # "row" or "key"
                    "head": idx[1],
                    geo["partner"]: [int(geo["lo"][t]), int(geo["hi"][t])],  # "keys" or "queries"
                    "terms": int(geo["terms"][t]),
                }
            )
            if len(idx) > 2:
                item["column"] = idx[2]
        items.append(cast(WorstElement, item))

    # Per (row, head): the worst |error| over the remaining axes (one column when axis 1 is not
    # a head axis of a packed case and is long, e.g. a probability row); the classes read it.
    if ref.ndim == 1 or (geo is None and ref.shape[1] > 64):
        per_row = err.reshape(ref.shape[0], -1).max(axis=1)[:, None]
    else:
        per_row = err.reshape(ref.shape[0], ref.shape[1], -1).max(axis=2)
    emap = _error_map(err, axes, allowance) if err.size else None

    # Classify (a heuristic: the evidence is reported with it).
    r_top = ref.ravel()[top]
    evidence = []
    likely = None
    big = flat[top] > 0.5 * allowance
    edge = big & (~np.isfinite(r_top) | ~np.isfinite(got.ravel()[top]))
    if geo is not None:  # an element that sums over no term (a row sees no key, a key no row)
        edge = edge | (big & (geo["terms"][[np.unravel_index(int(f), ref.shape)[0] for f in top]] == 0))
    else:  # without the geometry, a reference of exactly 0 stands for a masked element
        edge = edge | (big & (r_top == 0))
    finite_ref = np.abs(ref[np.isfinite(ref)])
    scale = float(max(1.0, finite_ref.max())) if finite_ref.size else 1.0
    if not edge.any() and n and flat[top[0]] > GROSS * scale:
        # float32 rounding (a built-in's or a sum's) stays near 1e-6 of the scale: an error this
        # large is a wrong set of terms, i.e. a mask or index edge.
        likely = "mask edge"
        evidence.append(
            f"the worst error is {flat[top[0]] / scale:.1e} of the output's scale, far beyond "
            "float32 rounding: a wrong set of terms"
        )
    if edge.any():
        likely = "mask edge"
        evidence.append(
            f"{int(edge.sum())} of the {n} worst elements sum over no term (masked), or one side is not finite"
            if geo is not None
            else f"{int(edge.sum())} of the {n} worst elements are where the reference is exactly 0 or not finite"
        )
    row_max = per_row.max(axis=1)
    finite_rows = np.isfinite(row_max)
    live = finite_rows & (row_max > 0)
    spread = float((row_max[live] > 0.25 * row_max[live].max()).mean()) if live.any() else 0.0
    evidence.append(f"{spread:.0%} of the rows with any error are within 4x of the worst row")
    if likely is None and suspects:
        likely = "built-in precision"
        evidence.append("the kernel calls built-ins the precision probe found off: " + ", ".join(suspects))
    rho = None
    if geo is not None and live.sum() >= 3:
        rho = _spearman(geo["terms"][live].astype(np.float64), row_max[live])
        evidence.append(f"rank correlation of row error with terms summed: {rho:.2f}")
    if likely is None and rho is not None and rho >= 0.5:
        likely = "summation order"
    if likely is None and (spread >= 0.2 or (rho is not None and rho <= -0.3)):
        likely = "built-in precision"  # every term shifted, or worst where each term weighs most
    if likely is None:
        likely = "localised"
    return {"output": output, "axes": axes, "worst": items, "map": emap, "likely": likely, "evidence": evidence}


def render(loc: Localisation, allowance: Optional[float] = None) -> List[str]:
    """Text lines for `wgattn check`'s table."""
    lines = [f"    {loc['output']}: likely {loc['likely']} ({'; '.join(loc['evidence'])})"]
    for it in loc["worst"]:
        where = ", ".join(f"{a} {i}" for a, i in zip(loc["axes"], it["index"])) or f"index {it['index']}"
        if "sequence" in it:
            kind, at = ("key", it["key"]) if "key" in it else ("row", it["row"])
            partner, span = ("queries", it["queries"]) if "queries" in it else ("keys", it["keys"])
            where = (
                f"seq {it['sequence']} {kind} {at} head {it['head']}"
                + (f" col {it['column']}" if "column" in it else "")
                + f", {partner} {span[0]}..{span[1]} ({it['terms']} terms)"
            )
        lines.append(f"      {where}: got {it['got']:.7g} ref {it['ref']:.7g} |err| {it['err']:.3e}")
    m = loc["map"]
    if m:
        lines.append(f"      |err|/allowance by {m['rows']} (rows) x blocks of {m['blocks_of']} {[b[0] for b in m['blocks']]}:")
        for h, row in enumerate(m["ratio"][:16]):
            lines.append(f"        {h:3d}: " + " ".join(f"{x:5.2f}" for x in row))
    return lines
