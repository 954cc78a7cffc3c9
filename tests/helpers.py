"""Helpers shared by the Python tests: one copy each (they were copied across test files).
Import them as `from helpers import ...` (pytest puts tests/ on sys.path: it has a conftest.py
and no __init__.py)."""

from typing import List, Mapping

import pytest

__all__ = ["LOCAL", "needs_features", "failures", "browser_stand_in"]

# TestClient's base URL: a Host the app serves by default (TestClient's own "testserver" is refused
# by the Host check, app/limits.py ALLOWED_HOSTS).
LOCAL = "http://localhost"


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


def browser_stand_in(session, run: int, runtime) -> None:
    """Do what the page's JS does with an open run of a wgattn.page.PageSession, on `runtime`
    (wgattn.native) instead of WebGPU: fetch each buffer's bytes, run the plan, hand every
    read-back buffer to add_buffer."""
    plan = session.plan(run)
    for b in plan.buffers:
        assert session.plan_bytes(run, b.name) == (b.data or b"")
    for name, data in runtime.run(plan).raw.items():
        session.add_buffer(run, name, data)
