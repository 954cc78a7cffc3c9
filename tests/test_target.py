"""The one answer to "can this adapter run it, and if not why" (wgattn.target): features, subgroup
matrix configurations, buffer sizes, the workgroup grid, workgroup storage and invocations; what
the page reports of its device, read; and plans built for a target passed explicitly (nothing
global changes when a runtime is made)."""

import dataclasses
import json

import pytest

from helpers import TARGET
from wgattn import interfaces, live, registry
from wgattn.page import PageSession
from wgattn.target import MATRIX_FEATURE, WEBGPU_LIMITS, MatrixConfig, Target

REG = registry.load()


def _limits(**changes):
    limits = dict(WEBGPU_LIMITS)
    limits.update({k.replace("_", "-"): v for k, v in changes.items()})
    return limits


def test_a_missing_feature_is_named():
    kernel = REG.kernel("flash_fwd.tiled_f16")
    assert Target().lacks(kernel) == f"flash_fwd.tiled_f16 needs adapter features ['shader-f16'], which {Target().name} lacks"
    assert TARGET.lacks(kernel) == ""
    plan = live.build(kernel.id, {}).plan(Target(name="a plain adapter"))
    assert not plan.dispatches and "needs adapter features ['shader-f16'], which a plain adapter lacks" in plan.unavailable


def test_a_subgroup_matrix_kernel_needs_a_matching_configuration():
    """A kernel asking for f16 x f16 -> f32 subgroup matrices: the feature alone is not enough; the
    plan picks the adapter's first matching configuration and hands its sizes to the knobs."""
    kernel = dataclasses.replace(
        REG.kernel("flash_fwd.tiled"),
        id="flash_fwd.matrix",
        template="flash_fwd.tiled",
        requires=("shader-f16", "subgroups", MATRIX_FEATURE),
        matrix=("f16", "f32"),
        overrides={"WG": "SGM_M * 16", "D4": "ceil_div(head_dim, 4)", "BC": "SGM_N"},
    )
    features = frozenset({"shader-f16", "subgroups", MATRIX_FEATURE})
    bare = Target(features=features, name="an adapter")
    want = "needs chromium-experimental-subgroup-matrix with an f16 x f16 -> f32 configuration, which an adapter lacks"
    assert want in bare.lacks(kernel)
    configs = (MatrixConfig("f32", "f32", 8, 8, 1), MatrixConfig("f16", "f32", 8, 8, 8), MatrixConfig("f16", "f32", 16, 16, 16))
    unsized = Target(features=features, matrix_configs=configs, name="an adapter")
    assert "lays its work out by one fixed subgroup size; an adapter does not report its subgroup size" in unsized.lacks(kernel)
    target = Target(features=features, matrix_configs=configs, subgroup_sizes=(32, 32))
    assert target.lacks(kernel) == "" and target.matrix("f16", "f32") == configs[1]
    assert kernel.knobs({"head_dim": 64}, target) == {"WG": 128, "D4": 16, "BC": 8}


@pytest.mark.parametrize(
    "target, why",
    [
        (Target(limits=_limits(max_storage_buffer_binding_size=1024)), "buffer 'arena' needs"),
        (Target(limits=_limits(max_compute_workgroups_per_dimension=2)), "exceed 2 per dimension"),
    ],
)
def test_a_plan_past_a_limit_says_which(target, why):
    iface = interfaces.get("sdpa_arena")
    plan = iface.plan(iface.kernels()[0], iface.conformance_cases()[0], TARGET)
    assert plan.unavailable == ""
    assert why in target.why_not(plan)


def test_workgroup_storage_and_invocations_are_checked_for_every_kernel():
    kernel = REG.kernel("attn_probs_batched.fast")  # no tile candidates: its WG is still held to the adapter
    small = Target(limits=_limits(max_compute_invocations_per_workgroup=128))
    with pytest.raises(ValueError, match="256 invocations"):
        kernel.fit({"head_dim": 64}, small)
    iface = interfaces.of(kernel)
    assert "no tile shape fits" in iface.plan(kernel, iface.conformance_cases()[0], small).unavailable


def test_the_page_s_device_is_read_and_tiles_follow_it():
    reported = {
        "name": "SwiftShader",
        "words": ["Google", "swiftshader", "SwiftShader Device (Subzero)"],
        "features": ["shader-f16", "timestamp-query"],
        "limits": {"max-compute-workgroup-storage-size": 32768, "max-compute-invocations-per-workgroup": 1024},
    }
    target = Target.from_json(reported)
    assert target.software and target.features == {"shader-f16", "timestamp-query"}
    assert Target.from_json(target.to_json()) == dataclasses.replace(target, name=target.name)
    session = PageSession()
    session.use_target(json.dumps(reported))
    availability = json.loads(session.availability())
    assert availability["flash_fwd.tiled"] == "" and "subgroups" in availability["attn_probs_batched.subgroup"]
    assert "chromium-experimental-subgroup-matrix" in availability["flash_fwd.smx"]
    gpu = Target.from_json({**reported, "words": ["nvidia"], "subgroup_min_size": 32, "subgroup_max_size": 32})
    assert gpu.subgroup_size() == 32 and Target.from_json(gpu.to_json()).subgroup_sizes == (32, 32)
    prepared = json.loads(session.prepare(json.dumps({"kernel": "flash_fwd.blocked", "config": {}})))
    constants = prepared["plan"]["dispatches"][0]["constants"]
    assert (constants["BR"], constants["WG"]) == (32, 32)  # the software tile
    for bad, message in [
        ({"features": "shader-f16"}, "features must be a list"),
        ({"limits": {"x": -1}}, "must be a number >= 0"),
        ({"subgroup_min_size": 64, "subgroup_max_size": 32}, "0 <= min <= max <= 1024"),
        ({"subgroup_max_size": "32"}, "must be integers"),
    ]:
        with pytest.raises(ValueError, match=message):
            Target.from_json(bad)


def test_no_target_is_global():
    """Two sessions (a page's, a test's) plan for two devices at once."""
    flash = interfaces.get("flash_fwd")
    kernel = REG.kernel("flash_fwd.blocked")
    case = flash.conformance_cases()[2]
    big = Target(limits=_limits(max_compute_workgroup_storage_size=49152, max_compute_invocations_per_workgroup=1024))
    small = Target()
    a = flash.plan(kernel, case, big).dispatches[0].constants
    b = flash.plan(kernel, case, small).dispatches[0].constants
    assert a != b and flash.plan(kernel, case, big).dispatches[0].constants == a
