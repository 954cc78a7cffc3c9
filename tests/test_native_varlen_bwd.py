"""The varlen_bwd kernels (the seed and the tiled one) run natively (wgpu-py; lavapipe here) against
the float64 reference, judged by the tolerance rule: every case of the interface's conformance grid,
determinism, the zeros the contract promises (rows with no visible key, keys no row sees), the
folded grid, tiling bugs planted in the tiled kernel and caught, and named ValueErrors."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import TARGET, WIDE, failures, first_wide_failure, needs_features, run_or_skip
from wgattn import conformance, registry
from wgattn.interfaces import Case
from wgattn.interfaces.varlen_bwd import INTERFACE as varlen_bwd

REG = registry.load()
KERNELS = REG.kernels_of("varlen_bwd")
KERNEL = REG.kernel("varlen_bwd.seed")  # interface-level checks (arguments, plan layout) use the seed
TILED = REG.kernel("varlen_bwd.tiled")
CASES = varlen_bwd.conformance_cases()


def _case(prefix: str):
    (case,) = [c for c in CASES if c.name.startswith(prefix)]
    return case


def _visibility(case):
    """(row_has_key [total_q], key_seen [total_k]) from the mask rule, written out loop by loop."""
    o = case.options
    left, right = o["window"]
    if o["causal"]:
        right = 0 if right == -1 else min(right, 0)
    cu_q, cu_k = case.inputs["cu_seqlens_q"], case.inputs["cu_seqlens_k"]
    row_has_key = np.zeros(int(cu_q[-1]), dtype=bool)
    key_seen = np.zeros(int(cu_k[-1]), dtype=bool)
    for b in range(len(cu_q) - 1):
        len_q, len_k = int(cu_q[b + 1] - cu_q[b]), int(cu_k[b + 1] - cu_k[b])
        offset = len_k - len_q if o["causal_align"] == "bottom_right" else 0
        for i in range(len_q):
            for j in range(len_k):
                if (left < 0 or j >= i + offset - left) and (right < 0 or j <= i + offset + right):
                    row_has_key[cu_q[b] + i] = True
                    key_seen[cu_k[b] + j] = True
    return row_has_key, key_seen


def test_grid_is_broad():
    dims = {c.inputs["q"].shape[2] for c in CASES}
    ratios = {c.inputs["q"].shape[1] // c.inputs["k"].shape[1] for c in CASES}
    assert {59, 64, 111, 130} <= dims
    assert {1, 3} <= ratios and any(c.inputs["k"].shape[1] == 1 and c.inputs["q"].shape[1] > 1 for c in CASES)
    assert {c.options["causal_align"] for c in CASES if c.options["causal"]} == {"bottom_right", "top_left"}
    assert any(c.options["softcap"] > 0 for c in CASES)
    assert max(c.inputs["k"].shape[0] for c in CASES) >= 1024
    empty_rows = empty_keys = 0
    for c in CASES:
        has_key, seen = _visibility(c)
        empty_rows += int((~has_key).sum())
        empty_keys += int((~seen).sum())
        lse = c.inputs["lse"]
        empty = np.broadcast_to(c.inputs["sinks"], lse.shape) if "sinks" in c.inputs else np.full(lse.shape, -np.inf)
        assert np.array_equal(lse[~has_key], empty[~has_key]) and np.isfinite(lse[has_key]).all()  # -inf, or the sink
    assert empty_rows > 0 and empty_keys > 0


def test_every_kernel_of_the_interface_is_tested():
    assert {"varlen_bwd.seed", "varlen_bwd.tiled"} <= {k.id for k in KERNELS}


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kernel_matches_reference(native_runtime, kernel, case):
    needs_features(native_runtime, kernel)
    rows = run_or_skip(native_runtime, kernel, case)
    assert [r["output"] for r in rows] == list(varlen_bwd.OUTPUTS)
    bad = failures(rows)
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize(
    "prefix", ["causal-br-d64-mqa-empty-seqs", "softcap-d64-gqa3", "long-causal-br-d64", "causal-tl-d111-gqa3"]
)
def test_runs_are_bit_identical(native_runtime, kernel, prefix):
    needs_features(native_runtime, kernel)
    plan = varlen_bwd.plan(kernel, _case(prefix), TARGET)
    a = native_runtime.run(plan).raw
    b = native_runtime.run(plan).raw
    assert a.keys() == b.keys() == {"dq", "dkv", "dsinks"}
    assert all(a[name] == b[name] for name in a)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("case", [c for c in CASES if not all(v.all() for v in _visibility(c))], ids=lambda c: c.name)
def test_invisible_rows_and_keys_get_exact_zeros(native_runtime, kernel, case):
    needs_features(native_runtime, kernel)
    has_key, seen = _visibility(case)
    plan = varlen_bwd.plan(kernel, case, native_runtime.target)
    if plan.unavailable:
        pytest.skip(plan.unavailable)
    got = native_runtime.run(plan).outputs
    assert np.all(got["dq"][~has_key] == 0.0)
    assert np.all(got["dk"][~seen] == 0.0) and np.all(got["dv"][~seen] == 0.0)
    assert np.any(got["dv"][seen] != 0.0)
    for name in varlen_bwd.OUTPUTS:
        assert np.isfinite(got[name]).all()


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_flashattention_plus_inf_lse_is_an_empty_row_too(native_runtime, kernel):
    """FlashAttention writes +inf as the lse of an empty row: the same gradients as -inf."""
    needs_features(native_runtime, kernel)
    case = _case("causal-br-d130-mqa-empty-rows")
    flipped = Case(case.name, dict(case.inputs), dict(case.options))
    lse = case.inputs["lse"].copy()
    lse[np.isneginf(lse)] = np.inf
    flipped.inputs["lse"] = lse
    a = native_runtime.run(varlen_bwd.plan(kernel, case, native_runtime.target)).raw
    b = native_runtime.run(varlen_bwd.plan(kernel, flipped, native_runtime.target)).raw
    assert a == b


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_case_from_reference_round_trips(native_runtime, kernel):
    needs_features(native_runtime, kernel)
    c = _case("window-both-causal-br-d130")
    i = c.inputs
    made = varlen_bwd.case_from_reference(
        i["dout"],
        i["q"],
        i["k"],
        i["v"],
        i["out"],
        i["lse"],
        i["cu_seqlens_q"].astype(np.int64),
        i["cu_seqlens_k"],
        causal=True,
        window=(8, 3),
        name="rt",
    )
    assert made.inputs["cu_seqlens_q"].dtype == np.int32
    ref = varlen_bwd.reference(made)
    for name, want in zip(varlen_bwd.OUTPUTS, varlen_bwd.reference(c).values()):
        np.testing.assert_array_equal(ref[name], want)
    assert all(r["pass"] for r in conformance.run_case(native_runtime, kernel, made))


def _small():
    rs = np.random.RandomState(1)
    q = rs.standard_normal((5, 2, 8)).astype(np.float32)
    k = rs.standard_normal((7, 1, 8)).astype(np.float32)
    v = rs.standard_normal((7, 1, 8)).astype(np.float32)
    return dict(
        dout=q.copy(),
        q=q,
        k=k,
        v=v,
        out=q.copy(),
        lse=np.zeros((5, 2), np.float32),
        cu_seqlens_q=np.array([0, 2, 5], np.int32),
        cu_seqlens_k=np.array([0, 3, 7], np.int32),
    )


@pytest.mark.parametrize(
    "change, match",
    [
        ({"q": np.zeros((5, 2, 8), np.int32)}, "q must be a float16, float32 or float64 array"),
        ({"k": np.zeros((7, 8), np.float32)}, "k must be 3-D"),
        ({"v": np.zeros((7, 1, 9), np.float32)}, "v must have k's shape"),
        ({"k": np.zeros((7, 1, 4), np.float32)}, "k head dim"),
        ({"k": np.zeros((7, 3, 8), np.float32), "v": np.zeros((7, 3, 8), np.float32)}, "q heads .2. must be a multiple"),
        ({"out": np.zeros((5, 2, 7), np.float32)}, "out must have q's shape"),
        ({"dout": np.zeros((4, 2, 8), np.float32)}, "dout must have q's shape"),
        ({"lse": np.zeros((2, 5), np.float32)}, "lse must have shape"),
        ({"cu_seqlens_q": np.array([1, 2, 5], np.int32)}, "cu_seqlens_q must start at 0"),
        ({"cu_seqlens_q": np.array([0, 3, 2, 5], np.int32)}, "cu_seqlens_q must be non-decreasing"),
        ({"cu_seqlens_k": np.array([0, 3, 6], np.int32)}, "cu_seqlens_k must end at total_k"),
        ({"cu_seqlens_k": np.array([0.0, 3.0, 7.0])}, "cu_seqlens_k must be a 1-D integer array"),
        ({"cu_seqlens_k": np.array([0, 7], np.int32)}, "same length"),
        ({"causal": "yes"}, "causal must be True or False"),
        ({"window": (-2, 0)}, "window must be"),
        ({"window": 3}, "window must be a pair"),
        ({"softcap": -1.0}, "softcap must be"),
        ({"scale": 0.0}, "scale must be"),
        ({"scale": float("nan")}, "scale must be"),
        ({"causal_align": "centre"}, "causal_align must be"),
    ],
)
def test_bad_arguments_are_named(change, match):
    args = _small()
    keywords = {}
    for key, value in change.items():
        if key in args:
            args[key] = value
        else:
            keywords[key] = value
    order = ("dout", "q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k")
    with pytest.raises(ValueError, match=match):
        varlen_bwd.case_from_reference(*(args[n] for n in order), **keywords)
    # plan() checks a hand-built case the same way
    case = Case(
        "bad",
        {n: args[n] for n in order},
        {
            "causal": keywords.get("causal", False),
            "window": keywords.get("window", (-1, -1)),
            "softcap": keywords.get("softcap", 0.0),
            "scale": keywords.get("scale"),
            "causal_align": keywords.get("causal_align", "bottom_right"),
        },
    )
    with pytest.raises(ValueError, match=match):
        varlen_bwd.plan(KERNEL, case, TARGET)


def test_missing_input_is_named():
    args = _small()
    del args["lse"]
    with pytest.raises(ValueError, match="lse is missing"):
        varlen_bwd.plan(KERNEL, Case("bad", args, {}), TARGET)


def test_plan_layout():
    args = _small()
    case = varlen_bwd.case_from_reference(
        *(args[n] for n in ("dout", "q", "k", "v", "out", "lse", "cu_seqlens_q", "cu_seqlens_k")),
        causal=True,
        window=(2, 5),
        softcap=3.0,
    )
    plan = varlen_bwd.plan(KERNEL, case, TARGET)
    assert [d.entry_point for d in plan.dispatches] == ["bwd_preprocess", "bwd_dkdv", "bwd_dq", "bwd_dsinks"]
    for d, p in zip(plan.dispatches, KERNEL.abi.passes):
        assert sorted(d.bindings) == sorted(p.uses)
    sizes = {b.name: b.size for b in plan.buffers}
    # stats: lse and delta [2, total_q, Hq], then ALiBi slopes and sinks [2, Hq]
    assert sizes["stats"] == 4 * (2 * 5 * 2 + 2 * 2) and sizes["dkv"] == 4 * 2 * 7 * 1 * 8 and sizes["params"] == 64
    assert [b.name for b in plan.buffers if b.read] == ["dq", "dkv", "dsinks"]
    params = next(b for b in plan.buffers if b.name == "params").data
    import struct

    fields = struct.unpack("<6I2iIffIII", params[:56])
    assert fields[:6] == (5, 7, 2, 1, 8, 2)
    assert fields[6:9] == (2, 0, 0)  # causal folds right to min(5, 0); bottom-right
    assert fields[9] == 3.0 and abs(fields[10] - 8**-0.5) < 1e-7
    assert fields[11:14] == (0, 0, 4)  # no ALiBi, no sinks; max_seqlen
    out = {o.name: (o.buffer, o.offset, o.shape) for o in plan.outputs}
    assert out == {
        "dq": ("dq", 0, (5, 2, 8)),
        "dk": ("dkv", 0, (7, 1, 8)),
        "dv": ("dkv", 56, (7, 1, 8)),
        "dsinks": ("dsinks", 0, (2,)),
    }


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("total_q, total_k", [(0, 5), (4, 0), (0, 0)])
def test_empty_totals(native_runtime, kernel, total_q, total_k):
    needs_features(native_runtime, kernel)
    rs = np.random.RandomState(2)
    q = rs.standard_normal((total_q, 2, 8)).astype(np.float32)
    k = rs.standard_normal((total_k, 1, 8)).astype(np.float32)
    case = varlen_bwd.case_from_reference(
        q.copy(),
        q,
        k,
        k.copy(),
        q.copy(),
        np.full((total_q, 2), -np.inf, np.float32),
        np.array([0, total_q], np.int32),
        np.array([0, total_k], np.int32),
        causal=True,
    )
    assert all(r["pass"] for r in conformance.run_case(native_runtime, kernel, case))


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_folded_grid_past_65535_workgroups(native_runtime, kernel):
    """WG = 1 and 72000 rows per pass: the kernel's workgroup grids fold into (65535, 2); every row
    is still computed once (the tiled kernel's other override constants stay as registered)."""
    needs_features(native_runtime, kernel)
    rs = np.random.RandomState(3)
    seqs, hq, d = 2000, 2, 2
    cu = (np.arange(seqs + 1) * 18).astype(np.int32)
    q, k, v, dout = (rs.standard_normal((int(cu[-1]), hq, d)).astype(np.float32) for _ in range(4))
    from wgattn import reference

    out, lse = reference.varlen_attention_fwd(q, k, v, cu, cu, window=(2, 1))
    case = varlen_bwd.case_from_reference(
        dout, q, k, v, out.astype(np.float32), lse.astype(np.float32), cu, cu, window=(2, 1), name="folded"
    )
    overrides = {**kernel.overrides, "WG": 1}
    plan = varlen_bwd.plan(kernel, case, TARGET, overrides=overrides)
    kernel_passes = [dsp for dsp in plan.dispatches if dsp.entry_point != "bwd_dsinks"]  # that one: a workgroup a head
    assert len(kernel_passes) == 3 and all(dsp.workgroups == (65535, 2, 1) for dsp in kernel_passes)
    rows = conformance.run_case(native_runtime, kernel, case, overrides=overrides)
    assert all(r["pass"] for r in rows), rows


# Bugs in the tiled kernel's tiling that the grid must catch: the band of query tiles a key block
# stages, the band of key tiles a query block stages, the per-pair mask, and blocks whose keys
# straddle a sequence boundary (walked as segments).
PLANTED = {
    "dkdv query band one row short at the top": ("let i_lo = seen_by.x;", "let i_lo = seen_by.x + 1;"),
    "dq key band one key short on the right": ("let j_hi = sees.y - 1;", "let j_hi = sees.y - 2;"),
    "dkdv mask lets one query row past the key's band": (
        "if (i >= row_lo && i <= row_hi) {",
        "if (i >= row_lo && i <= row_hi + 1) {",
    ),
    "dkdv keys of a later sequence join an earlier segment's tiles": (
        "let i_hi = seen_by.y - 1;\n    let mine = live && row >= seg && row < seg_end;",
        "let i_hi = seen_by.y - 1;\n    let mine = live && row >= seg;",
    ),
}


def test_unplanted_tiled_kernel_passes_the_same_loop(native_runtime):
    taken = [c for c in CASES if not varlen_bwd.plan(TILED, c, native_runtime.target).unavailable]
    bad = [c.name for c in taken if failures(conformance.run_case(native_runtime, TILED, c))]
    assert len(taken) > len(CASES) // 2 and not bad, bad


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_tiling_bugs_are_caught(native_runtime, bug):
    old, new = PLANTED[bug]

    def planted(case) -> str:  # the defines follow head_dim (vec4 rows where it allows)
        source = TILED.source({"head_dim": case.inputs["q"].shape[-1]})
        assert source.count(old) == 1, f"planted bug {bug!r} no longer matches the kernel"
        return source.replace(old, new)

    caught = first_wide_failure(native_runtime, TILED, CASES, planted)
    assert caught, f"no grid case fails {WIDE}x its allowance or more: {bug}"


# Bugs in ALiBi and the sinks' gradient (the interface's own pass, in every kernel's source) that
# the grid's rows with them must catch, planted in the seed and in the tiled kernel.
PLANTED_HEADS = {
    "ALiBi bias left of the diagonal only in dQ": (KERNEL, "-slope * f32(abs(j - pos))", "-slope * f32(max(pos - j, 0))"),
    "ALiBi origin one query off in dK/dV": (KERNEL, "f32(abs(jk - (i + offset)))", "f32(abs(jk - (i + offset + 1)))"),
    "the sinks' gradient with the wrong sign": (KERNEL, "dsinks[h] = -dsinks_part[0];", "dsinks[h] = dsinks_part[0];"),
    "the sinks' gradient skipping rows": (KERNEL, "let t = t0 + 64u * b;", "let t = t0 + 63u * b;"),
    "tiled: ALiBi slope's sign flipped in dK/dV": (
        TILED,
        "s -= slope * f32(abs(jk - (i + offset)));",
        "s += slope * f32(abs(jk - (i + offset)));",
    ),
    "tiled: ALiBi origin one key off in dQ": (TILED, "s -= slope * f32(abs(j - pos));", "s -= slope * f32(abs(j - pos - 1));"),
}


@pytest.mark.parametrize("bug", sorted(PLANTED_HEADS))
def test_planted_alibi_and_sinks_bugs_are_caught(native_runtime, bug):
    kernel, old, new = PLANTED_HEADS[bug]

    def planted(case) -> str:  # the defines follow head_dim (the tiled kernel's vec4 rows)
        source = kernel.source({"head_dim": case.inputs["q"].shape[-1]})
        assert source.count(old) == 1, f"planted bug {bug!r} no longer matches the kernel"
        return source.replace(old, new)

    heads = [c for c in CASES if {"alibi_slopes", "sinks"} & set(c.inputs)]
    caught = first_wide_failure(native_runtime, kernel, heads, planted)
    assert caught, f"no grid case fails {WIDE}x its allowance or more: {bug}"


def test_an_f16_backward_is_judged_on_f16_inputs_against_a_naive_f16_run():
    """varlen_bwd.smx computes in f16: its yardstick is the naive float16 backward (float16's error,
    several times float32's), on inputs rounded to float16."""
    smx = REG.kernel("varlen_bwd.smx")
    assert smx.precision == "f16"
    case = conformance.judged_case(smx, _case("softcap-d64"))
    ref, naive = conformance.expected(smx, case)
    ref32 = varlen_bwd.reference(case, dtype=np.float32)
    for name in ("dq", "dk", "dv"):
        err16 = np.abs(naive[name].astype(np.float64) - ref[name]).max()
        err32 = np.abs(ref32[name].astype(np.float64) - ref[name]).max()
        assert 1e-4 < err16 < 1e-1 and err16 > 50 * err32, (name, err16, err32)
