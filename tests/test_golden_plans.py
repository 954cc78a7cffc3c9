"""Every plan is what it was before the interfaces became one object each: the same buffers and
bytes, dispatches, constants, grids and trust, and the same WGSL declarations (tests/plan_digests.py
says what each digest covers). A kernel whose WGSL changed on purpose is listed in CHANGED_WGSL
with why; its plans must still match in everything else, and its grid passes on lavapipe in
trusted and checked mode (tests/test_native_grids.py)."""

import json
from pathlib import Path

import pytest
from plan_digests import digests

GOLDEN = json.loads((Path(__file__).parent / "golden" / "plans.json").read_text())

# kernel id -> why its WGSL text differs from the golden one (an H100 re-measure is owed).
CHANGED_WGSL: dict = {}


@pytest.fixture(scope="module")
def now():
    return digests()


def _kernel(key: str) -> str:
    parts = key.split("/")
    return parts[2] if parts[0] in ("grid", "live") else parts[3] if parts[0] == "bench" else ""


def test_the_same_plans_are_built(now):
    assert sorted(now) == sorted(GOLDEN)


def test_plans_are_byte_identical_but_for_the_wgsl(now):
    changed = {
        k: (GOLDEN[k], now[k])
        for k in GOLDEN
        if {n: v for n, v in now[k].items() if n not in ("wgsl", "raw")}
        != {n: v for n, v in GOLDEN[k].items() if n not in ("wgsl", "raw")}
    }
    assert changed == {}


def test_wgsl_declarations_are_unchanged(now):
    changed = sorted({_kernel(k) for k in GOLDEN if "wgsl" in GOLDEN[k] and now[k]["wgsl"] != GOLDEN[k]["wgsl"]})
    assert changed == sorted(CHANGED_WGSL)
