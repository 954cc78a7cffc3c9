"""flash_fwd.smx's plans: the registered kernel takes its subgroup-matrix configuration and subgroup
size from what the adapter reports, never assumed, and refuses, saying why, an adapter that lacks
them; the benchmark's variants (bench/smx_attention/smx_plan.py) are that kernel with one
configuration pinned; the workgroup bytes it budgets are those the WGSL declares; every flash_fwd
grid case gets a plan or a clear refusal. The kernel's numbers are checked on real subgroup
matrices by bench/smx_attention (testbed.sh on lavapipe, device_run.sh on a GPU) and by the page's
conformance view in a browser that offers them: no runtime here has them. The harness takes any
registered kernel (jobs.py --kernel): a matrix kernel pinned plans as registered, and the judge
reads every output of the kernel's interface from its place."""

import base64
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "smx_attention"))

import jobs  # noqa: E402
import smx_plan  # noqa: E402

from wgattn import interfaces, registry  # noqa: E402
from wgattn.conformance import expected, judged_case  # noqa: E402
from wgattn.expr import evaluate  # noqa: E402
from wgattn.target import WEBGPU_LIMITS, MatrixConfig, Target  # noqa: E402

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
        m = (
            re.fullmatch(r"array<array<(vec4<f\d+>), ([^>]+)>, ([^>]+)>", decl)
            or re.fullmatch(r"array<(atomic<u32>), (\d+)>()", decl)
            or re.fullmatch(r"array<(vec4<f\d+>), (.+)>()", decl)
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
    # Kᵀ's fragments, or P's where more (P takes Kᵀ's place); P's alone when K is not staged
    knobs["KPF"] = knobs["RB"] * knobs["PB"] if kind == "direct" else max(knobs["SB"] * knobs["DK"], knobs["RB"] * knobs["PB"])
    declared = _workgroup_vars(k.source(sizes, knobs=fit.knobs), knobs)
    assert fit.storage == sum(declared.values())
    # NVIDIA's driver reads a subgroup matrix from its address rounded down to 16 bytes: a
    # variable whose size is not a multiple of 16 can leave the next fragment array misaligned.
    assert {v: b for v, b in declared.items() if b % 16} == {}


@pytest.mark.parametrize("cfg", [(16, 16, 16), (8, 8, 8)])
@pytest.mark.parametrize("head_dim", [59, 64, 128, 256])
def test_the_backwards_workgroup_storage_is_what_the_wgsl_declares(cfg, head_dim):
    """varlen_bwd.smx's dK/dV pass uses every workgroup variable of the module: the plan's storage
    is their sum, and each is a multiple of 16 bytes (the driver's fragment alignment, above)."""
    k = smx_plan.kernel(cfg, 32 if cfg[0] == 16 else 8, kernel_id="varlen_bwd.smx")
    sizes = {"head_dim": head_dim, "max_seqlen": 100}
    fit = k.fit(sizes, _target(49152))
    knobs = dict(fit.knobs, NT=fit.knobs["BT"] // cfg[0], DC=fit.knobs["DP"] // cfg[0])
    declared = _workgroup_vars(k.source(sizes, knobs=fit.knobs), knobs)
    assert fit.storage == sum(declared.values())
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
        (ds,) = map(int, re.findall(r"const DS: u32 = (\d+)u;", main.source))
        assert main.constants["WG"] == main.constants["RB"] * ds * 32  # DS subgroups per row block


def test_subgroup_too_small_for_the_fragment_rows_is_refused():
    with pytest.raises(ValueError, match="subgroup size 8 with M = 16"):
        smx_plan.kernel((16, 16, 16), 8)


def _adapter(configs, subgroup_sizes=(32, 32)) -> Target:
    return Target(
        features=frozenset(("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix")),
        limits={**WEBGPU_LIMITS, "max-compute-workgroup-storage-size": 49152, "max-compute-invocations-per-workgroup": 1024},
        matrix_configs=tuple(MatrixConfig.from_json(c) for c in configs),
        subgroup_sizes=subgroup_sizes,
        name="a test adapter",
    )


REGISTERED = registry.load().kernel("flash_fwd.smx")


ADAPTERS = [(H100, 32, (16, 16, 16)), (H100[2:], 32, (16, 8, 16)), (LAVAPIPE, 16, (8, 8, 8))]


@pytest.mark.parametrize("configs, subgroup, cfg", ADAPTERS)
def test_registered_kernel_plans_with_the_adapters_configuration(configs, subgroup, cfg):
    """The first f16 x f16 -> f32 configuration the adapter lists and its subgroup size set the
    WGSL's fragment sizes and the workgroup; the benchmark's pinned variant plans the same."""
    flash_fwd = interfaces.get("flash_fwd")
    target = _adapter(configs, (subgroup, subgroup))
    for case in flash_fwd.conformance_cases()[:12]:
        c = judged_case(REGISTERED, case)
        plan, pinned = flash_fwd.plan(REGISTERED, c, target), flash_fwd.plan(smx_plan.kernel(cfg, subgroup), c, target)
        assert plan.unavailable == pinned.unavailable
        if plan.unavailable:
            continue
        (main,), (same,) = plan.dispatches, pinned.dispatches
        assert (main.source, main.constants, main.workgroups) == (same.source, same.constants, same.workgroups)
        consts = dict(re.findall(r"const (S[MNK]): u32 = (\d+)u;", main.source))
        assert tuple(int(consts[n]) for n in ("SM", "SN", "SK")) == cfg
        (ds,) = map(int, re.findall(r"const DS: u32 = (\d+)u;", main.source))  # subgroups per row block
        assert main.invocations == main.constants["RB"] * ds * subgroup and main.constants["TPR"] == ds * subgroup // cfg[0]


def test_an_adapter_without_what_it_needs_is_told_why():
    flash_fwd = interfaces.get("flash_fwd")
    case = judged_case(REGISTERED, flash_fwd.conformance_cases()[0])
    no_f16_f32 = [c for c in H100 if c["resultComponentType"] != "f32"]
    for target, why in [
        (Target(), "needs adapter features"),
        (_adapter(no_f16_f32), "needs chromium-experimental-subgroup-matrix with an f16 x f16 -> f32 configuration"),
        (_adapter(H100, (8, 32)), "reports subgroup sizes 8..32"),
        (_adapter(H100, (0, 0)), "does not report its subgroup size"),
    ]:
        assert why in target.lacks(REGISTERED)
        plan = flash_fwd.plan(REGISTERED, case, target)
        assert not plan.dispatches and why in plan.unavailable


# --- Any registered kernel: the harness's --kernel (bench/smx_attention/jobs.py) -------------------

MATRIX_KERNELS = sorted(k.id for k in registry.load().kernels.values() if k.matrix is not None)


@pytest.mark.parametrize("kernel_id", MATRIX_KERNELS)
@pytest.mark.parametrize("configs, subgroup, cfg", ADAPTERS)
def test_every_matrix_kernel_pinned_plans_as_registered(kernel_id, configs, subgroup, cfg):
    """Pinned to the configuration and subgroup size an adapter reports, in its registered kind,
    any kernel with a "matrix" entry plans exactly what the registered kernel plans there."""
    k = registry.load().kernel(kernel_id)
    iface = interfaces.of(k)
    target = _adapter(configs, (subgroup, subgroup))
    pinned = smx_plan.kernel(cfg, subgroup, kernel_id=kernel_id)
    assert pinned.matrix is None and pinned.interface == k.interface
    for case in iface.conformance_cases()[:6]:
        c = judged_case(k, case)
        plan, same = iface.plan(k, c, target), iface.plan(pinned, c, target)
        assert bool(plan.unavailable) == bool(same.unavailable)  # the reasons list the tiles, pinned or not
        got = [(d.entry_point, d.source, d.constants, d.workgroups) for d in same.dispatches]
        assert [(d.entry_point, d.source, d.constants, d.workgroups) for d in plan.dispatches] == got


def test_a_kernel_without_matrix_is_taken_as_registered():
    tiled = registry.load().kernel("varlen_bwd.tiled")
    assert smx_plan.kinds_of("varlen_bwd.tiled") == ("staged",)
    assert smx_plan.kinds_of() == smx_plan.KINDS
    assert smx_plan.kernel((8, 8, 8), 8, kernel_id="varlen_bwd.tiled") == tiled
    assert smx_plan.kernel((16, 16, 16), 32, kind="staged", kernel_id="varlen_bwd.tiled") == tiled
    with pytest.raises(ValueError, match=r"varlen_bwd.tiled: kind must be one of \('staged',\)"):
        smx_plan.kernel((8, 8, 8), 8, kind="direct", kernel_id="varlen_bwd.tiled")


def test_judge_reads_every_output_of_the_recorded_kernel_at_its_offset(tmp_path):
    """jobs.py for a varlen_bwd kernel: the job file records the kernel, dk and dv share one
    buffer (dv at an offset), and the judge takes each from its place: the reference's own
    numbers pass, dv's moved by a little more than its allowance fails dv alone."""
    built = jobs.build([(8, 8, 8)], 8, 32768, "quick", False, ["auto"], kernel_id="varlen_bwd.tiled")
    assert built["kernel"] == "varlen_bwd.tiled" and [e["tag"] for e in built["configs"]] == ["8x8x8"]
    entry = built["configs"][0]
    entry["correctness"] = [j for j in entry["correctness"] if j["name"].startswith("window-0-0-tl-d64-empty-rows")]
    (job,) = entry["correctness"]
    assert [o[:2] for o in job["outputs"]] == [["dq", "dq"], ["dk", "dkv"], ["dv", "dkv"]]
    assert job["outputs"][2][3] == int(np.prod(job["outputs"][1][2]))  # dv after dk
    kern = smx_plan.kernel((8, 8, 8), 8, kernel_id="varlen_bwd.tiled")
    case = judged_case(kern, {c.name: c for c in jobs.correctness_cases("all", "varlen_bwd.tiled")}[job["name"]])
    ref, _ = expected(kern, case)

    def results(shift_dv: float) -> dict:
        dv = ref["dv"] + shift_dv
        raw = {"dq": ref["dq"].astype(np.float32).tobytes(), "dkv": np.concatenate([ref["dk"], dv]).astype(np.float32).tobytes()}
        got = {job["name"]: {"raw": {b: base64.b64encode(r).decode() for b, r in raw.items()}}}
        return {"configs": {"8x8x8": {"correctness": got}}}

    jobs_path, res_path = tmp_path / "jobs.json", tmp_path / "results.json"
    jobs_path.write_text(json.dumps(built))
    res_path.write_text(json.dumps(results(0.0)))
    rows = jobs.judge_results(jobs_path, res_path)
    assert [(r["output"], r["pass"]) for r in rows] == [("dq", True), ("dk", True), ("dv", True)]
    res_path.write_text(json.dumps(results(1.5 * max(r["allowance"] for r in rows))))
    rows = jobs.judge_results(jobs_path, res_path)
    assert [(r["output"], r["pass"]) for r in rows] == [("dq", True), ("dk", True), ("dv", False)]
