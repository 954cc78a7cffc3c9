"""Helpers shared by the Python tests: one copy each (they were copied across test files).
Import them as `from helpers import ...` (pytest puts tests/ on sys.path: it has a conftest.py
and no __init__.py)."""

import math
from typing import Iterable, List, Mapping, Optional, Tuple

import pytest

from wgattn.target import MATRIX_FEATURE, MatrixConfig, Target

__all__ = [
    "LOCAL",
    "needs_features",
    "run_or_skip",
    "failures",
    "WIDE",
    "ratio",
    "first_wide_failure",
    "browser_stand_in",
    "session_on",
    "TARGET",
    "MATRIX_TARGET",
    "chosen_knobs",
]

# TestClient's base URL: a Host the app serves by default (TestClient's own "testserver" is refused
# by the Host check, app/limits.py ALLOWED_HOSTS).
LOCAL = "http://localhost"

# A planted bug counts as caught only where some case fails by at least this many times its
# allowance. lavapipe's JIT rounds differently per host CPU: a bug that failed by 1.1x the
# allowance on one CPU passed (0.7x) on another. Every planted bug in the suite fails by 10^5x or
# more (or gives NaN, -inf): a margin of 4 keeps the verdict the same on any runtime.
WIDE = 4.0

# An adapter with WebGPU's default limits and every feature a kernel asks for: plans built
# without a device (they are only inspected, or run on a runtime that checks them itself).
TARGET = Target(features=frozenset({"shader-f16", "subgroups", "timestamp-query"}), name="a test adapter")
# The same with subgroup matrices as Chromium lists them on an H100 (f16 x f16 -> f32 16x16x16,
# subgroups of 32): what a kernel on subgroup matrices needs to be planned at all.
MATRIX_TARGET = Target(
    features=TARGET.features | {MATRIX_FEATURE},
    matrix_configs=(MatrixConfig("f16", "f32", 16, 16, 16),),
    subgroup_sizes=(32, 32),
    name="a test adapter with subgroup matrices",
)


def needs_features(runtime, kernel) -> None:
    """Skip, saying why, when `runtime`'s adapter cannot run `kernel` (wgattn.target says)."""
    why = runtime.target.lacks(kernel)
    if why:
        pytest.skip(why)


def run_or_skip(runtime, kernel, case) -> List[Mapping[str, object]]:
    """wgattn.conformance.run_case's rows, or a skip saying why `kernel` cannot take `case` on
    `runtime`'s adapter (a head dim no tile fits, a knob it does not carry). Which cases a kernel
    refuses is pinned apart (e.g. test_native_flash_fwd's test_refusals_are_the_ones_expected)."""
    from wgattn import conformance
    from wgattn.errors import DoesNotFit

    try:
        return conformance.run_case(runtime, kernel, case)
    except DoesNotFit as exc:
        pytest.skip(str(exc))


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


def first_wide_failure(runtime, kernel, cases, source) -> Optional[Tuple[str, float]]:
    """(case name, ratio) of the first of `cases` that `source` (WGSL, or a function of the case
    giving it: a kernel whose defines follow the case's sizes), built as `kernel`, fails by WIDE
    times its allowance or more; None when no case does. Narrow rows are tried first: a planted
    bug's WGSL is compiled afresh for each tile shape, and a software adapter's compile grows with
    the head dimension the shape unrolls. A case the planted WGSL cannot be planned for (a head dim
    past the caps it was expanded with) is passed over."""
    from wgattn import conformance, interfaces

    def width(case) -> int:
        return max((a.shape[-1] for a in case.inputs.values() if a.ndim > 1), default=0)

    for case in sorted(cases, key=width):
        text = source(case) if callable(source) else source
        judged = conformance.judged_case(kernel, case)
        if interfaces.of(kernel).plan(kernel, judged, runtime.target, source=text).unavailable:
            continue
        r = ratio(conformance.run_case(runtime, kernel, case, source=text))
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


def session_on(runtime):
    """A wgattn.page.PageSession whose browser device is `runtime`'s (wgattn.native): plans are
    built for it, as the page builds them for the browser's (use_target), and browser_stand_in
    runs them there."""
    import json

    from wgattn.page import PageSession

    session = PageSession()
    session.use_target(json.dumps(runtime.target.to_json()))
    return session


def chosen_knobs(kernel) -> dict:
    """The knobs `kernel`'s interface chooses for it (Interface.layout_on) on its first grid case on
    the default target (MATRIX_TARGET for a kernel on subgroup matrices), or {} where the
    interface leaves them to the kernel's registry entry."""
    from wgattn import interfaces
    from wgattn.interfaces import Interface

    iface = interfaces.of(kernel)
    if type(iface).layout_on is Interface.layout_on:
        return {}
    target = MATRIX_TARGET if kernel.matrix is not None else Target()
    return dict(iface.layout_on(kernel, iface.conformance_cases()[0], target).knobs)
