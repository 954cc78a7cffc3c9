"""Helpers shared by the Python tests: one copy each (they were copied across test files).
Import them as `from helpers import ...` (pytest puts tests/ on sys.path: it has a conftest.py
and no __init__.py)."""

import math
import re
from typing import Iterable, List, Mapping, Optional, Tuple

import pytest

__all__ = [
    "needs_features",
    "failures",
    "WIDE",
    "ratio",
    "first_wide_failure",
    "browser_stand_in",
    "wgsl_functions",
    "workgroup_storage",
]

# A planted bug counts as caught only where some case fails by at least this many times its
# allowance. lavapipe's JIT rounds differently per host CPU: a bug that failed by 1.1x the
# allowance on one CPU passed (0.7x) on another. Every planted bug in the suite fails by 10^5x or
# more (or gives NaN, -inf): a margin of 4 keeps the verdict the same on any runtime.
WIDE = 4.0


def needs_features(runtime, kernel) -> None:
    """Skip, saying why, when `runtime`'s adapter lacks a feature `kernel` requires."""
    from wgattn import native

    missing = [f for f in kernel.requires if native._FEATURE_NAMES.get(f, f) not in runtime.features]
    if missing:
        pytest.skip(f"{kernel.id} needs adapter features {missing}, which {runtime.name} lacks")


def failures(rows: List[Mapping[str, object]]) -> List[str]:
    """One line per failing output of wgattn.conformance's rows: error, allowance, naive error."""
    return [
        f"{r['output']}: max abs err {r['max_abs_err']:.3e} > allowance {r['allowance']:.3e} (naive {r['naive_err']:.3e})"
        for r in rows
        if not r["pass"]
    ]


def ratio(rows: Iterable[Mapping[str, object]]) -> float:
    """The worst max_abs_err / allowance over wgattn.conformance's rows (inf for NaN)."""
    worst = 0.0
    for r in rows:
        err, allowance = float(r["max_abs_err"]), float(r["allowance"])  # type: ignore[arg-type]
        worst = max(worst, math.inf if math.isnan(err) else err / allowance)
    return worst


def first_wide_failure(runtime, kernel, cases, source: str) -> Optional[Tuple[str, float]]:
    """(case name, ratio) of the first of `cases` that `source`, built as `kernel`, fails by WIDE
    times its allowance or more; None when no case does."""
    from wgattn import conformance

    for case in cases:
        r = ratio(conformance.run_case(runtime, kernel, case, source=source))
        if r >= WIDE:
            return case.name, r
    return None


def browser_stand_in(session, run: int, runtime) -> None:
    """Do what the page's JS does with an open run of a wgattn.page.PageSession, on `runtime`
    (wgattn.native) instead of WebGPU: fetch each buffer's bytes, run the plan, hand every
    read-back buffer to add_buffer."""
    plan = session.plan(run)
    for b in plan.buffers:
        assert session.plan_bytes(run, b.name) == (b.data or b"")
    for name, data in runtime.run(plan).raw.items():
        session.add_buffer(run, name, data)


def wgsl_functions(src: str):
    """name -> body text of every WGSL function (bodies end at the first line that is "}")."""
    return {m.group(1): m.group(2) for m in re.finditer(r"\bfn\s+(\w+)\s*\([^{]*\{(.*?)\n\}", src, re.S)}


def workgroup_storage(src: str, knobs, entry: str) -> int:
    """Bytes of the `var<workgroup>` arrays that `entry` uses (directly or through the functions it
    calls, as WebGPU counts them), each size expression evaluated on the knobs."""
    from wgattn import registry

    alias = dict(re.findall(r"alias\s+(\w+)\s*=\s*(\w+)\s*;", src))
    size = {"f32": 4, "i32": 4, "u32": 4, "f16": 2}
    fns = wgsl_functions(src)
    seen, todo, text = set(), [entry], ""
    while todo:
        name = todo.pop()
        if name in seen or name not in fns:
            continue
        seen.add(name)
        text += fns[name]
        todo.extend(re.findall(r"\b(\w+)\s*\(", fns[name]))
    total = 0
    for name, elem, expr in re.findall(r"var<workgroup>\s+(\w+)\s*:\s*array<(.+?),\s*([^>]+)>\s*;", src):
        if not re.search(r"\b%s\b" % name, text):
            continue
        m = re.fullmatch(r"vec(\d)<(\w+)>", elem.strip())
        scalar = alias.get(m.group(2), m.group(2)) if m else alias.get(elem.strip(), elem.strip())
        total += (int(m.group(1)) if m else 1) * size[scalar] * registry._evaluate(re.sub(r"(\d+)u\b", r"\1", expr), knobs)
    return total
