"""The subgroup-matrix kernels' plans (flash_fwd.smx, varlen_bwd.smx): each takes its matrix
configuration and subgroup size from what the adapter reports, never assumed, and refuses, saying
why, an adapter that lacks them; the workgroup bytes a plan budgets are those the WGSL declares,
each variable a multiple of 16 bytes; every flash_fwd grid case gets a plan or a clear refusal.
Their numbers are checked on real subgroup matrices by bench/smx_testbed (lavapipe's, through
Dawn) and by the page's conformance view in a browser that offers them: no runtime of the tests
has them."""

import re

import pytest

from wgattn import interfaces, registry
from wgattn.conformance import judged_case
from wgattn.expr import evaluate
from wgattn.target import WEBGPU_LIMITS, MatrixConfig, Target

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
REGISTERED = registry.load().kernel("flash_fwd.smx")


def _adapter(configs, subgroup_sizes=(32, 32), storage: int = 49152) -> Target:
    return Target(
        features=frozenset(("shader-f16", "subgroups", "chromium-experimental-subgroup-matrix")),
        limits={**WEBGPU_LIMITS, "max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": 1024},
        matrix_configs=tuple(MatrixConfig.from_json(c) for c in configs),
        subgroup_sizes=subgroup_sizes,
        name="a test adapter",
    )


def _only(cfg):
    """An adapter's list holding f16 x f16 -> f32 at `cfg` alone."""
    m, n, k = cfg
    return [{"componentType": "f16", "resultComponentType": "f32", "M": m, "N": n, "K": k}]


def _workgroup_vars(source: str, knobs: dict) -> dict:
    """Bytes of each of the WGSL's var<workgroup> declarations, its consts and overrides
    substituted (written out here, apart from wgattn.wgsl's reader, to check it on nested arrays
    and aliases)."""
    names = dict(knobs)
    for name, value in re.findall(r"const (\w+): u32 = ([^;]+);", source):
        names[name] = evaluate(value, names)
    aliases = dict(re.findall(r"alias (\w+) = ([^;]+);", source))
    scalars = {"vec4<f16>": 8, "vec4<f32>": 16, "atomic<u32>": 4}

    def size(decl: str) -> int:
        decl = aliases.get(decl, decl)
        if decl in scalars:
            return scalars[decl]
        assert decl.startswith("array<") and decl.endswith(">"), f"a workgroup type this test does not size: {decl}"
        inner, depth = decl[6:-1], 0
        for i, ch in enumerate(inner):  # the element type ends at the comma outside <> and ()
            depth += (ch in "<(") - (ch in ">)")
            if ch == "," and depth == 0:
                return size(inner[:i].strip()) * evaluate(inner[i + 1 :], names)
        raise AssertionError(f"an array without a count: {decl}")

    return {var: size(decl) for var, decl in re.findall(r"var<workgroup> (\w+): ([^;]+);", source)}


@pytest.mark.parametrize("cfg", [(16, 16, 16), (16, 8, 16), (16, 8, 8), (8, 8, 8)])
@pytest.mark.parametrize("head_dim", [59, 64, 128, 256])
def test_storage_budget_is_what_the_wgsl_declares(cfg, head_dim):
    target = _adapter(_only(cfg), (32, 32) if cfg[0] == 16 else (8, 8), storage=1 << 20)
    sizes = {"head_dim": head_dim}
    fit = REGISTERED.fit(sizes, target)
    knobs = dict(fit.knobs, SB=fit.knobs["BC"] // cfg[1], PB=fit.knobs["BC"] // cfg[2])
    knobs.update(DK=knobs["DP"] // cfg[2], DN=knobs["DP"] // cfg[1])
    knobs["KPF"] = max(knobs["SB"] * knobs["DK"], knobs["RB"] * knobs["PB"])  # Kᵀ's fragments, or P's where more
    declared = _workgroup_vars(REGISTERED.source(sizes, target, knobs=fit.knobs), knobs)
    assert fit.storage == sum(declared.values())
    # NVIDIA's driver reads a subgroup matrix from its address rounded down to 16 bytes: a
    # variable whose size is not a multiple of 16 can leave the next fragment array misaligned.
    assert {v: b for v, b in declared.items() if b % 16} == {}


@pytest.mark.parametrize("cfg", [(16, 16, 16), (8, 8, 8)])
@pytest.mark.parametrize("head_dim", [59, 64, 128, 256])
def test_the_backwards_workgroup_storage_is_what_the_wgsl_declares(cfg, head_dim):
    """varlen_bwd.smx's dK/dV pass uses every workgroup variable of the kernel (the interface's own
    dsinks pass has its one): the plan's storage is their sum, and each is a multiple of 16 bytes
    (the driver's fragment alignment, above)."""
    k = registry.load().kernel("varlen_bwd.smx")
    target = _adapter(_only(cfg), (32, 32) if cfg[0] == 16 else (8, 8))
    sizes = {"head_dim": head_dim, "max_seqlen": 100}
    fit = k.fit(sizes, target)
    knobs = dict(fit.knobs)
    source = k.source(sizes, target, knobs=fit.knobs)
    interface_pass = (k.folder / "lib/varlen_bwd_dsinks.wgsl").read_text()
    declared = _workgroup_vars(source.replace(interface_pass, ""), knobs)
    assert fit.storage == sum(declared.values())
    assert {v: b for v, b in declared.items() if b % 16} == {}


def test_every_grid_case_gets_a_plan_or_a_clear_refusal():
    flash_fwd = interfaces.get("flash_fwd")
    target = _adapter(H100)
    for case in flash_fwd.conformance_cases():
        plan = flash_fwd.plan(REGISTERED, judged_case(REGISTERED, case), target)
        if plan.unavailable:
            refusals = ["no tile shape fits"]
            refusals += ["supports head_dim <= 256"] if case.inputs["q"].shape[2] > 256 else []
            assert any(r in plan.unavailable for r in refusals) and not plan.dispatches, plan.unavailable
            continue
        (main,) = plan.dispatches
        assert main.entry_point == "flash_fwd"
        (ds,) = map(int, re.findall(r"const DS: u32 = (\d+)u;", main.source))
        assert main.constants["WG"] == main.constants["RB"] * ds * 32  # DS subgroups per row block


ADAPTERS = [(H100, 32, (16, 16, 16)), (H100[2:], 32, (16, 8, 16)), (LAVAPIPE, 16, (8, 8, 8))]


@pytest.mark.parametrize("configs, subgroup, cfg", ADAPTERS)
def test_registered_kernel_plans_with_the_adapters_configuration(configs, subgroup, cfg):
    """The first f16 x f16 -> f32 configuration the adapter lists and its subgroup size set the
    WGSL's fragment sizes and the workgroup."""
    flash_fwd = interfaces.get("flash_fwd")
    target = _adapter(configs, (subgroup, subgroup))
    planned = 0
    for case in flash_fwd.conformance_cases()[:12]:
        plan = flash_fwd.plan(REGISTERED, judged_case(REGISTERED, case), target)
        if plan.unavailable:
            continue
        planned += 1
        (main,) = plan.dispatches
        consts = dict(re.findall(r"const (S[MNK]): u32 = (\d+)u;", main.source))
        assert tuple(int(consts[n]) for n in ("SM", "SN", "SK")) == cfg
        (ds,) = map(int, re.findall(r"const DS: u32 = (\d+)u;", main.source))  # subgroups per row block
        assert main.invocations == main.constants["RB"] * ds * subgroup and main.constants["TPR"] == ds * subgroup // cfg[0]
    assert planned


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


WIDE = registry.load().kernel("flash_fwd.smx_wide")


@pytest.mark.parametrize("cfg", [(16, 16, 16), (16, 8, 16), (8, 8, 8)])
@pytest.mark.parametrize("head_dim", [59, 300, 512])
def test_the_wide_kernels_storage_is_what_the_wgsl_declares(cfg, head_dim):
    """flash_fwd.smx_wide (head dims to 512): the plan's workgroup bytes are the WGSL's (its key or
    value tile, DS partial S per row block, P), each variable a multiple of 16 bytes."""
    target = _adapter(_only(cfg), (32, 32) if cfg[0] == 16 else (8, 8), storage=1 << 20)
    sizes = {"head_dim": head_dim}
    fit = WIDE.fit(sizes, target)
    kn = dict(fit.knobs)
    kn.update(SB=kn["BC"] // cfg[1], PB=kn["BC"] // cfg[2], DK=kn["DP"] // cfg[2], DN=kn["DP"] // cfg[1])
    kn["KVN"] = max(kn["SB"] * kn["DK"], kn["PB"] * kn["DN"])
    declared = _workgroup_vars(WIDE.source(sizes, target, knobs=fit.knobs), kn)
    assert fit.storage == sum(declared.values())
    assert {v: b for v, b in declared.items() if b % 16} == {}


def test_head_dim_512_on_the_h100_takes_the_wide_kernel_in_48_kib():
    """On the H100 (48 KiB, 32-wide subgroups, 16x16x16) flash_fwd.smx refuses D = 512 and the
    wide kernel, ranked next, takes 2 row blocks of 16 rows, 4 head-dim parts each (256
    invocations, so up to 255 registers a lane for both prefetched tiles) and 16 keys a tile: 25
    KiB of K or V (its fragments padded), 10 KiB of partial S, 1.5 KiB of P. At D <= 256
    flash_fwd.smx stays first."""
    flash_fwd = interfaces.get("flash_fwd")
    target = _adapter(H100)
    ranked = registry.load().ranked("varlen_attention_fwd")
    assert [k.id for k in ranked[:2]] == ["flash_fwd.smx", "flash_fwd.smx_wide"]
    for case in flash_fwd.conformance_cases():
        d = case.inputs["q"].shape[2]
        plans = [(k.id, flash_fwd.plan(k, judged_case(k, case), target)) for k in ranked[:2]]
        first = next(kid for kid, p in plans if not p.unavailable)
        assert first == ("flash_fwd.smx" if d <= 256 else "flash_fwd.smx_wide"), (case.name, plans[0][1].unavailable)
    fit = WIDE.fit({"head_dim": 512}, target)
    assert (fit.knobs["RB"], fit.knobs["BC"], fit.knobs["DS"], fit.storage, fit.invocations) == (2, 16, 4, 37392, 256)


def test_the_wide_kernel_refuses_an_adapter_too_small_for_its_smallest_tile_with_the_numbers():
    """A D = 512 tile needs its key tile whole (16 keys x 512 dims of f16 fragments, 25 KiB with their padding): an
    adapter with 16 KiB of workgroup storage is refused, every tile tried and its bytes named."""
    flash_fwd = interfaces.get("flash_fwd")
    case = next(c for c in flash_fwd.conformance_cases() if c.inputs["q"].shape[2] == 512)
    plan = flash_fwd.plan(WIDE, judged_case(WIDE, case), _adapter(H100, storage=16384))
    assert not plan.dispatches
    assert "no tile shape fits an adapter with 16384 bytes" in plan.unavailable
    assert "{'RB': 1, 'BC': 16}: 31504 bytes" in plan.unavailable
