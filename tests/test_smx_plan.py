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

from wgattn.conformance import judged_case  # noqa: E402
from wgattn.errors import DoesNotFit  # noqa: E402
from wgattn.interfaces import flash_fwd  # noqa: E402
from wgattn.registry import _evaluate  # noqa: E402

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


def _int_expr(wgsl: str) -> str:
    """A WGSL u32 expression in the registry's expression language."""
    return re.sub(r"\b(\d+)u\b", r"\1", wgsl).replace("/", "//")


def _workgroup_bytes(source: str, knobs: dict) -> int:
    """Bytes of the WGSL's var<workgroup> declarations, its consts and overrides substituted."""
    names = dict(knobs)
    for name, value in re.findall(r"const (\w+): u32 = ([^;]+);", source):
        names[name] = _evaluate(_int_expr(value), names)
    sizes = {"vec4<f16>": 8, "vec4<f32>": 16, "atomic<u32>": 4}
    total = 0
    for decl in re.findall(r"var<workgroup> \w+: ([^;]+);", source):
        m = re.fullmatch(r"array<array<(vec4<f\d+>), ([^>]+)>, ([^>]+)>", decl)
        if m:
            total += sizes[m.group(1)] * _evaluate(_int_expr(m.group(2)), names) * _evaluate(_int_expr(m.group(3)), names)
        else:
            total += sizes[decl]
    return total


@pytest.mark.parametrize("kind", smx_plan.KINDS)
@pytest.mark.parametrize("cfg", [(16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 8, 8)])
@pytest.mark.parametrize("head_dim", [59, 64, 128, 256])
def test_storage_budget_is_what_the_wgsl_declares(cfg, kind, head_dim):
    k = smx_plan.kernel(cfg, 32 if cfg[0] == 16 else 8, kind=kind)
    sizes = {"head_dim": head_dim}
    limits = {"max_wg_storage": 1 << 20, "max_invocations": 1024, "cpu": 0}
    knobs = k.knobs(sizes, limits=limits)
    knobs.update(DP=knobs["DP"], SB=knobs["BC"] // cfg[1], PB=knobs["BC"] // cfg[2])
    knobs.update(DK=knobs["DP"] // cfg[2], DN=knobs["DP"] // cfg[1])
    source = k.source(sizes)
    assert _evaluate(k.storage, {**sizes, **knobs}) == _workgroup_bytes(source, knobs)


@pytest.mark.parametrize("kind", smx_plan.KINDS)
def test_every_grid_case_gets_a_plan_or_a_clear_refusal(kind):
    from wgattn.registry import set_target_limits, target_limits

    saved = target_limits()
    set_target_limits(49152, 1024)
    try:
        k = smx_plan.kernel((16, 16, 16), 32, kind=kind)
        for case in flash_fwd.conformance_cases():
            c = judged_case(k, case)
            try:
                plan = smx_plan.f16_plan(k, c) if kind.startswith(("staged16", "direct")) else flash_fwd.plan(k, c)
            except DoesNotFit as e:
                assert "no tile shape fits" in str(e)
                continue
            main = plan.dispatches[-1]
            assert main.entry_point == "flash_fwd"
            assert main.constants["WG"] == main.constants["RB"] * 32  # a subgroup per row block
    finally:
        set_target_limits(saved["max_wg_storage"], saved["max_invocations"], bool(saved["cpu"]))


def test_subgroup_too_small_for_the_fragment_rows_is_refused():
    with pytest.raises(ValueError, match="subgroup size 8 with M = 16"):
        smx_plan.kernel((16, 16, 16), 8)
