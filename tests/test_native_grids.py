"""Trusted mode's promise, held whole: every kernel registered as trusted passes its interface's
entire conformance grid compiled WITH wgpu's runtime bounds checks as well (the per-interface
tests run the grids trusted, the native runtime's default). A kernel whose trusted build reads or
writes out of bounds would still pass checked and fail trusted (or the other way round: a check
that changes a result), so both modes are held on every case. In the slow tier (tests/conftest.py)."""

import pytest

from helpers import failures, needs_features, run_or_skip
from wgattn import interfaces, registry

REG = registry.load()
TRUSTED = [k for k in REG.kernels.values() if k.trusted]
ITEMS = [(k, c) for k in TRUSTED for c in interfaces.of(k).conformance_cases()]


def test_every_trusted_kernel_has_a_grid():
    assert {k.id for k, _ in ITEMS} == {k.id for k in TRUSTED} and len(TRUSTED) >= 7


@pytest.mark.parametrize("kernel, case", ITEMS, ids=[f"{k.id}-{c.name}" for k, c in ITEMS])
def test_trusted_kernel_passes_its_grid_checked(native_runtime, kernel, case):
    needs_features(native_runtime, kernel)
    saved = native_runtime.trusted
    native_runtime.trusted = False
    try:
        rows = run_or_skip(native_runtime, kernel, case)
    finally:
        native_runtime.trusted = saved
    bad = failures(rows)
    assert rows and not bad, "; ".join(bad)
