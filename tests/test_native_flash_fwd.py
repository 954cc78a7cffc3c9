"""The flash_fwd kernels run natively (wgpu-py; lavapipe here) against the float64 reference, judged
by the tolerance rule: the whole conformance grid, the contract's empty rows, the native API's
routing (GQA, windows, softcap reach the tiled kernel), tile-skipping bugs planted and caught,
and named ValueErrors for what a kernel cannot take."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import WIDE, failures, first_wide_failure, needs_features, run_or_skip
from wgattn import conformance, native, reference, registry
from wgattn.interfaces.flash_fwd import INTERFACE as flash_fwd

REG = registry.load()
KERNELS = REG.kernels_of("flash_fwd")
CASES = flash_fwd.conformance_cases()
TILED = REG.kernel("flash_fwd.tiled")


def _case(prefix: str):
    (case,) = [c for c in CASES if c.name.startswith(prefix)]
    return case


def test_grid_is_broad():
    dims = {c.inputs["q"].shape[2] for c in CASES}
    assert {1, 8, 59, 64, 111, 128, 130, 256, 512} <= dims
    heads = [set(c.inputs) & {"alibi_slopes", "sinks"} for c in CASES]
    assert {frozenset(h) for h in heads} >= {frozenset(), frozenset({"alibi_slopes"}), frozenset({"sinks"})}
    assert {"alibi_slopes", "sinks"} in heads and max(c.inputs["k"].shape[0] for c in CASES) >= 65536
    ratios = {c.inputs["q"].shape[1] // c.inputs["k"].shape[1] for c in CASES}
    assert {1, 2, 3, 4} <= ratios
    assert {c.options["causal_align"] for c in CASES if c.options["causal"]} == {"bottom_right", "top_left"}
    assert any(c.options["softcap"] > 0 for c in CASES)
    assert any(c.options["window"] != (-1, -1) for c in CASES)
    assert max(c.inputs["k"].shape[0] for c in CASES) >= 2048


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kernel_matches_reference(native_runtime, kernel, case):
    needs_features(native_runtime, kernel)
    rows = run_or_skip(native_runtime, kernel, case)
    assert [r["output"] for r in rows] == list(flash_fwd.OUTPUTS)
    if kernel.precision == "f32":  # a float32 kernel is judged against float32's error
        assert all(r["naive_err"] < 1e-4 for r in rows)
    bad = failures(rows)
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_rows_without_keys_give_zero_and_minus_inf(native_runtime, kernel):
    needs_features(native_runtime, kernel)
    case = _case("causal-br-d64-mqa-empty-seqs")  # 45 queries on 19 keys, bottom-right: 26 empty rows
    got = native_runtime.run(flash_fwd.plan(kernel, case, native_runtime.target)).outputs
    ref = flash_fwd.reference(case)
    empty = np.isneginf(ref["lse"])
    assert empty.sum() >= 26
    assert np.isneginf(got["lse"][empty]).all() and np.isfinite(got["lse"][~empty]).all()
    assert (got["out"][empty] == 0.0).all()


# Bugs in the tiling that a grid must catch: the band of tiles the block loads, and the per-row mask.
PLANTED = {
    "block band one key short on the right": (
        "let band = visible_keys(row0, row_last, offset, len_k, wl, wr);",
        "let band = visible_keys(row0, row_last, offset, len_k, wl, wr) - vec2<i32>(0, 1);",
    ),
    "block band one key short on the left": (
        "let band = visible_keys(row0, row_last, offset, len_k, wl, wr);",
        "let band = visible_keys(row0, row_last, offset, len_k, wl, wr) + vec2<i32>(1, 0);",
    ),
    "row mask lets one key past the window": (
        "let row_band = visible_keys(i, i, offset, len_k, wl, wr);",
        "let row_band = visible_keys(i, i, offset, len_k, wl, wr) + vec2<i32>(0, 1);",
    ),
    "tile loads stop one key early": ("if (j < hi && d < dim) {", "if (j + 1 < hi && d < dim) {"),
    "alpha not applied to the sum": ("l = l * alpha + tile_sum;", "l = l + tile_sum;"),
    # ALiBi and sinks: caught by the grid's rows with them (the bias past the diagonal only by the
    # rows without causal)
    "ALiBi bias left of the diagonal only": ("x -= slope * f32(abs(j - pos));", "x -= slope * f32(max(pos - j, 0));"),
    "ALiBi origin one key off": ("let pos = i + offset;", "let pos = i + offset + 1;"),
    "sink missing from the sum": ("var l = select(0.0, 1.0, sinks);", "var l = 0.0;"),
    "sink not the starting max": ("var m = select(LOWEST, alibi_sinks[hq + head], sinks);", "var m = LOWEST;"),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_tiling_bugs_are_caught(native_runtime, bug):
    old, new = PLANTED[bug]
    source = TILED.source({"head_dim": 64})  # its register arrays sized for head dims up to 256
    assert source.count(old) == 1, f"planted bug {bug!r} no longer matches the kernel"
    caught = first_wide_failure(native_runtime, TILED, CASES, source.replace(old, new))
    assert caught, f"no grid case fails {WIDE}x its allowance or more: {bug}"


def test_refusals_are_the_ones_expected(native_runtime):
    """Which grid cases a kernel this adapter runs refuses: none up to head_dim 256, ALiBi and
    sinks included; at 512 only where no tile shape fits the adapter's workgroup storage (the
    registry's numbers in the reason); the tiled kernels take every case."""
    for kernel in KERNELS:
        if native_runtime.target.lacks(kernel):
            continue
        for case in CASES:
            plan = flash_fwd.plan(kernel, conformance.judged_case(kernel, case), native_runtime.target)
            if kernel.id.startswith("flash_fwd.tiled") or case.inputs["q"].shape[2] <= 256:
                assert not plan.unavailable, (kernel.id, case.name, plan.unavailable)
            elif plan.unavailable:
                assert "no tile shape fits an adapter with" in plan.unavailable and "bytes" in plan.unavailable


def test_native_api_routes_gqa_window_softcap_to_flash_fwd(native_runtime):
    names = native.implementations("varlen_attention_fwd")
    assert names.index("tiled") < names.index("seed")
    rs = np.random.RandomState(3)
    q = rs.standard_normal((90, 6, 48)).astype(np.float32)
    k = rs.standard_normal((70, 2, 48)).astype(np.float32)
    v = rs.standard_normal((70, 2, 48)).astype(np.float32)
    cu_q = np.array([0, 40, 90], dtype=np.int32)
    cu_k = np.array([0, 50, 70], dtype=np.int32)
    kw = dict(causal=True, window=(9, -1), softcap=3.0)
    out, lse = native.varlen_attention_fwd(q, k, v, cu_q, cu_k, **kw)
    ref_out, ref_lse = reference.varlen_attention_fwd(q, k, v, cu_q, cu_k, **kw)
    assert np.abs(out - ref_out).max() < 1e-5
    finite = np.isfinite(ref_lse)
    assert np.abs(lse[finite] - ref_lse[finite]).max() < 1e-5
    assert (np.isneginf(lse) == ~finite).all()
    with pytest.raises(ValueError, match="window"):
        native.varlen_attention_fwd(q, k, v, cu_q, cu_k, impl="seed", **kw)
    if "tiled_f16" in names:  # on request only, and judged as f16
        out16, _ = native.varlen_attention_fwd(q, k, v, cu_q, cu_k, impl="tiled_f16", **kw)
        assert 1e-6 < np.abs(out16 - ref_out).max() < 1e-2


def test_f16_kernels_are_judged_on_f16_inputs_against_a_naive_f16_run():
    f16 = [k for k in KERNELS if k.precision == "f16"]
    assert f16, "no f16 kernel registered for flash_fwd"
    case = conformance.judged_case(f16[0], _case("softcap-d64"))
    assert all((a.astype(np.float16).astype(np.float32) == a).all() for a in case.inputs.values() if a.dtype.kind == "f")
    ref, naive = conformance.expected(f16[0], case)
    err = max(np.abs(naive["out"].astype(np.float64) - ref["out"]).max(), 1e-12)
    assert 1e-4 < err < 1e-2  # float16's error, not float32's


def test_dense_case_is_sdpa(native_runtime):
    rs = np.random.RandomState(5)
    q, k, v = (rs.standard_normal((2, 3, 67, 32)).astype(np.float32) for _ in range(3))
    case = flash_fwd.dense_case(q, k, v, causal=True)
    out = native_runtime.run(flash_fwd.plan(TILED, case, native_runtime.target)).outputs["out"]
    want = reference.sdpa(q, k, v, causal=True)  # [B, H, S, D]
    assert np.abs(out.reshape(2, 67, 3, 32).transpose(0, 2, 1, 3) - want).max() < 1e-5


def test_head_dim_past_the_tiled_limit_is_refused_with_the_limit(native_runtime):
    case = flash_fwd.case_from_reference(
        np.zeros((4, 1, 516), np.float32), np.zeros((4, 1, 516), np.float32), np.zeros((4, 1, 516), np.float32), [0, 4], [0, 4]
    )
    plan = flash_fwd.plan(TILED, case, native_runtime.target)
    assert "flash_fwd.tiled supports head_dim <= 512, got 516" in plan.unavailable and not plan.dispatches
    with pytest.raises(ValueError, match=r"flash_fwd.tiled supports head_dim <= 512, got 516"):
        native_runtime.run(plan)


@pytest.mark.parametrize(
    "bad, match",
    [
        (dict(k=np.zeros((5, 4, 16), np.float32)), r"multiple of k/v heads"),
        (dict(cu_seqlens_q=[0, 3, 2]), r"non-decreasing"),
        (dict(window=(-2, 0)), r"window"),
        (dict(softcap=-1.0), r"softcap"),
        (dict(causal_align="centre"), r"causal_align"),
    ],
)
def test_bad_arguments_name_what_is_wrong(bad, match):
    args = dict(
        q=np.zeros((4, 6, 16), np.float32),
        k=np.zeros((5, 2, 16), np.float32),
        v=np.zeros((5, 2, 16), np.float32),
        cu_seqlens_q=[0, 4],
        cu_seqlens_k=[0, 5],
    )
    if "k" in bad:
        args["v"] = bad["k"]
    args.update(bad)
    kw = {key: args.pop(key) for key in list(args) if key in ("window", "softcap", "causal_align")}
    if "cu_seqlens_q" in bad:
        args["cu_seqlens_k"] = [0, 2, 5]
    with pytest.raises(ValueError, match=match):
        flash_fwd.case_from_reference(args["q"], args["k"], args["v"], args["cu_seqlens_q"], args["cu_seqlens_k"], **kw)
