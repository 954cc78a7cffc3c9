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
_BAND = "its visible band, diagonal and empty-row -inf from lib/varlen.wgsl instead of its own inline copies"
_TOKENS = "the token's sequence and the queries that see a key from lib/varlen_tokens.wgsl"
_BLOCK = "its query block from lib/flash_fwd_block.wgsl, in rows of `override BR: u32 = WG`"
CHANGED_WGSL = {
    "flash_fwd.tiled": _BAND + "; " + _BLOCK,
    "flash_fwd.tiled_f16": _BAND + "; " + _BLOCK,
    "varlen_fwd.seed": _BAND + "; " + _TOKENS,
    "varlen_bwd.seed": _BAND + "; " + _TOKENS,
    "varlen_bwd.tiled": _BAND + "; " + _TOKENS,
}
# kernel id -> why its live configuration's fields differ (the tensors drawn must not).
CHANGED_CONFIGS = {
    "varlen_fwd.seed": "one configuration class per interface: varlen_fwd's has no heads_kv, window or softcap",
    "attn_probs.seed": "one configuration class per interface: attn_probs's has no positions (always 1) nor scale (always 1)",
}


@pytest.fixture(scope="module")
def now():
    return digests()


_KERNEL_AT = {"grid": 2, "live": 2, "bench": 3, "live-config": 1}  # where a key names its kernel


def _kernel(key: str) -> str:
    parts = key.split("/")
    return parts[_KERNEL_AT[parts[0]]] if parts[0] in _KERNEL_AT else ""


def test_the_same_plans_are_built(now):
    assert sorted(now) == sorted(GOLDEN)


def test_plans_are_byte_identical_but_for_the_wgsl(now):
    def kept(key, digests):
        drop = {"wgsl", "raw"} | ({"config"} if key.startswith("live-config/") and _kernel(key) in CHANGED_CONFIGS else set())
        return {n: v for n, v in digests.items() if n not in drop}

    changed = {k: (GOLDEN[k], now[k]) for k in GOLDEN if kept(k, now[k]) != kept(k, GOLDEN[k])}
    assert changed == {}


def test_only_the_listed_configurations_changed(now):
    changed = sorted(_kernel(k) for k in GOLDEN if k.startswith("live-config/") and now[k]["config"] != GOLDEN[k]["config"])
    assert changed == sorted(CHANGED_CONFIGS)


def test_wgsl_declarations_are_unchanged(now):
    changed = sorted({_kernel(k) for k in GOLDEN if "wgsl" in GOLDEN[k] and now[k]["wgsl"] != GOLDEN[k]["wgsl"]})
    assert changed == sorted(CHANGED_WGSL)
