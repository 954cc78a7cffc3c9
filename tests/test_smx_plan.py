"""flash_fwd.smx's plan (bench/smx_attention/smx_plan.py, until the kernel joins the registry): the
subgroup-matrix configuration comes from what the adapter lists, never assumed; the workgroup
bytes it budgets are those the WGSL declares; every flash_fwd grid case gets a plan or a clear
refusal. The kernel's numbers are checked on real subgroup matrices by bench/smx_attention
(testbed.sh on lavapipe, device_run.sh on a GPU): no runtime here has them."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "smx_attention"))

import smx_plan  # noqa: E402

from wgattn import interfaces  # noqa: E402
from wgattn.conformance import judged_case  # noqa: E402
from wgattn.expr import evaluate  # noqa: E402
from wgattn.target import WEBGPU_LIMITS, Target  # noqa: E402

H100 = [  # what Chromium lists on the H100 with f16 on (ENVIRONMENT.md)
    {"componentType": "f16", "resultComponentType": "f32", "M": 16, "N": 16, "K": 16},
    {"componentType": "f16", "resultComponentType": "f16", "M": 16, "N": 16, "K": 16},
    {"componentType": "f16", "resultComponentType": "f32", "M": 16, "N": 8, "K": 16},
    {"componentType": "f16", "resultComponentType": "f32", "M": 16, "N": 8, "K": 8},
    {"componentType": "i8", "resultComponentType": "i32", "M": 16, "N": 16, "K": 32},
]
LAVAPIPE = [
    {"componentType": "f16", "resultComponentType": "f16", "M": 8, "N": 8, "K": 8},
    {"componentType": "f16", "resultComponentType": "f32", "M": 8, "N": 8, "K": 8},
]


def test_config_is_taken_from_the_adapter():
    assert smx_plan.choose_config(H100) == (16, 16, 16)
    assert smx_plan.choose_config(H100[2:]) == (16, 8, 16)
    assert smx_plan.choose_config(LAVAPIPE) == (8, 8, 8)


def test_no_f16_to_f32_config_is_refused_with_what_the_adapter_lists():
    only_int = [{"componentType": "i8", "resultComponentType": "i32", "M": 16, "N": 16, "K": 32}]
    with pytest.raises(ValueError, match=r"f16 x f16 -> f32.*i8->i32 16x16x32"):
        smx_plan.choose_config(only_int)
    with pytest.raises(ValueError, match="lists none"):
        smx_plan.choose_config([])


def _workgroup_vars(source: str, knobs: dict) -> dict:
    """Bytes of each of the WGSL's var<workgroup> declarations, its consts and overrides
    substituted (written out here, apart from wgattn.wgsl's reader, to check it on nested arrays)."""
    names = dict(knobs)
    for name, value in re.findall(r"const (\w+): u32 = ([^;]+);", source):
        names[name] = evaluate(value, names)
    sizes = {"vec4<f16>": 8, "vec4<f32>": 16, "atomic<u32>": 4}
    out = {}
    for var, decl in re.findall(r"var<workgroup> (\w+): ([^;]+);", source):
        m = re.fullmatch(r"array<array<(vec4<f\d+>), ([^>]+)>, ([^>]+)>", decl) or re.fullmatch(
            r"array<(atomic<u32>), (\d+)>()", decl
        )
        if m:
            out[var] = sizes[m.group(1)] * evaluate(m.group(2), names) * evaluate(m.group(3) or "1", names)
        else:
            out[var] = sizes[decl]
    return out


def _target(storage: int) -> Target:
    limits = {**WEBGPU_LIMITS, "max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": 1024}
    return Target(features=frozenset(("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix")), limits=limits)


@pytest.mark.parametrize("kind", smx_plan.KINDS)
@pytest.mark.parametrize("cfg", [(16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 8, 8)])
@pytest.mark.parametrize("head_dim", [59, 64, 128, 256])
def test_storage_budget_is_what_the_wgsl_declares(cfg, kind, head_dim):
    k = smx_plan.kernel(cfg, 32 if cfg[0] == 16 else 8, kind=kind)
    sizes = {"head_dim": head_dim}
    fit = k.fit(sizes, _target(1 << 20))
    knobs = dict(fit.knobs, SB=fit.knobs["BC"] // cfg[1], PB=fit.knobs["BC"] // cfg[2])
    knobs.update(DK=knobs["DP"] // cfg[2], DN=knobs["DP"] // cfg[1])
    declared = _workgroup_vars(k.source(sizes), knobs)
    assert fit.storage == sum(declared.values())
    # NVIDIA's driver reads a subgroup matrix from its address rounded down to 16 bytes: a
    # variable whose size is not a multiple of 16 can leave the next fragment array misaligned.
    assert {v: b for v, b in declared.items() if b % 16} == {}


@pytest.mark.parametrize("kind", smx_plan.KINDS)
def test_every_grid_case_gets_a_plan_or_a_clear_refusal(kind):
    flash_fwd = interfaces.get("flash_fwd")
    k = smx_plan.kernel((16, 16, 16), 32, kind=kind)
    target = _target(49152)
    for case in flash_fwd.conformance_cases():
        c = judged_case(k, case)
        if kind.startswith(("staged16", "direct")):
            plan = smx_plan.f16_plan(k, c, target)
        else:
            plan = flash_fwd.plan(k, c, target)
        if plan.unavailable:
            assert "no tile shape fits" in plan.unavailable and not plan.dispatches
            continue
        main = plan.dispatches[-1]
        assert main.entry_point == "flash_fwd"
        assert main.constants["WG"] == main.constants["RB"] * 32  # a subgroup per row block


def test_subgroup_too_small_for_the_fragment_rows_is_refused():
    with pytest.raises(ValueError, match="subgroup size 8 with M = 16"):
        smx_plan.kernel((16, 16, 16), 8)
