"""Helpers shared by the Python tests: one copy each (they were copied across test files).
Import them as `from helpers import ...` (pytest puts tests/ on sys.path: it has a conftest.py
and no __init__.py)."""

from typing import List, Mapping

import pytest

from wgattn.target import Target

__all__ = ["needs_features", "failures", "browser_stand_in", "session_on", "TARGET"]

# An adapter with WebGPU's default limits and every feature a kernel asks for: plans built
# without a device (they are only inspected, or run on a runtime that checks them itself).
TARGET = Target(features=frozenset({"shader-f16", "subgroups", "timestamp-query"}), name="a test adapter")


def needs_features(runtime, kernel) -> None:
    """Skip, saying why, when `runtime`'s adapter cannot run `kernel` (wgattn.target says)."""
    why = runtime.target.lacks(kernel)
    if why:
        pytest.skip(why)


def failures(rows: List[Mapping[str, object]]) -> List[str]:
    """One line per failing output of wgattn.conformance's rows: error, allowance, naive error."""
    return [
        f"{r['output']}: max abs err {r['max_abs_err']:.3e} > allowance {r['allowance']:.3e} (naive {r['naive_err']:.3e})"
        for r in rows
        if not r["pass"]
    ]


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
