"""varlen_fwd.seed run natively (wgpu-py; lavapipe here) on the interface's conformance grid,
judged by the tolerance rule against the float64 reference; empty rows exactly (out 0, lse -inf);
a grid folded past 65535 workgroups; the interface module's argument errors."""

import numpy as np
import pytest

from helpers import TARGET
from wgattn import conformance, registry
from wgattn.interfaces import Case
from wgattn.interfaces.varlen_fwd import INTERFACE as varlen_fwd

KERNEL = registry.load().kernel("varlen_fwd.seed")
CASES = varlen_fwd.conformance_cases()


def _inputs(lens_q, lens_k, heads=2, dim=5, seed=0):
    rng = np.random.default_rng(seed)
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    return {
        "q": rng.standard_normal((int(cu_q[-1]), heads, dim), dtype=np.float32),
        "k": rng.standard_normal((int(cu_k[-1]), heads, dim), dtype=np.float32),
        "v": rng.standard_normal((int(cu_k[-1]), heads, dim), dtype=np.float32),
        "cu_seqlens_q": cu_q,
        "cu_seqlens_k": cu_k,
    }


def test_case_names_are_unique():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_conformance_case(native_runtime, case):
    rows = conformance.run_case(native_runtime, KERNEL, case)
    assert [r["output"] for r in rows] == list(varlen_fwd.OUTPUTS)
    for r in rows:
        assert r["pass"], (
            f"{r['case']} {r['output']}: max abs err {r['max_abs_err']:.3e} > allowance "
            f"{r['allowance']:.3e} (naive f32 {r['naive_err']:.3e})"
        )


def test_rows_without_keys_are_exactly_zero_and_minus_inf(native_runtime):
    # Sequence 1 has queries but no keys; sequence 2 has neither; sequences 0 and 3 are ordinary.
    inputs = _inputs([3, 4, 0, 2], [5, 0, 0, 3], heads=3, dim=70)
    case = Case("empty-rows", inputs, {"causal": True, "scale": None})
    got = native_runtime.run(varlen_fwd.plan(KERNEL, case, native_runtime.target)).outputs
    empty = slice(3, 7)
    assert np.all(got["out"][empty] == 0.0)
    assert np.all(np.isneginf(got["lse"][empty]))
    others = np.r_[0:3, 7:9]
    assert np.all(np.isfinite(got["out"][others])) and np.all(np.isfinite(got["lse"][others]))
    assert np.all(got["out"][others] != 0.0)


def test_grid_folded_past_65535_workgroups(native_runtime):
    """More tokens than 65535 workgroups of WG hold: the kernel must unfold (x, y) correctly."""
    wg = KERNEL.overrides["WG"]
    total_q = 65535 * wg + 3 * wg + 5
    lens_q = [total_q - 1000, 999, 1]
    inputs = _inputs(lens_q, [2, 3, 1], heads=1, dim=1, seed=5)
    case = Case("folded", inputs, {"causal": False, "scale": 0.7})
    plan = varlen_fwd.plan(KERNEL, case, TARGET)
    assert plan.dispatches[0].workgroups[1] > 1
    rows = conformance.judge(
        case, native_runtime.run(plan).outputs, varlen_fwd.reference(case), varlen_fwd.reference(case, dtype=np.float32)
    )
    assert all(r["pass"] for r in rows), rows


def _case(**changes):
    inputs = _inputs([3, 2], [4, 1])
    options = {"causal": False, "scale": None}
    for key, value in changes.items():
        (options if key in options else inputs)[key] = value
    return Case("bad", inputs, options)


@pytest.mark.parametrize(
    "changes, match",
    [
        ({"q": np.zeros((5, 2), np.float32)}, "q must be 3-D"),
        ({"q": np.zeros((5, 2, 5), np.int32)}, "q must be a float16, float32 or float64 array"),
        ({"k": np.zeros((5, 2, 4), np.float32)}, "k head dim must equal q head dim"),
        ({"k": np.zeros((5, 1, 5), np.float32), "v": np.zeros((5, 1, 5), np.float32)}, "GQA"),
        ({"v": np.zeros((4, 2, 5), np.float32)}, "v must have k's shape"),
        ({"q": np.zeros((5, 2, 0), np.float32)}, "head dim D must be >= 1"),
        ({"cu_seqlens_q": np.array([1, 3, 5], np.int32)}, "cu_seqlens_q must start at 0"),
        (
            {"cu_seqlens_q": np.array([0, 3, 2, 5], np.int32), "cu_seqlens_k": np.array([0, 4, 4, 5], np.int32)},
            "cu_seqlens_q must be non-decreasing",
        ),
        ({"cu_seqlens_k": np.array([0, 4, 6], np.int32)}, "cu_seqlens_k must end at total_k"),
        ({"cu_seqlens_k": np.array([0.0, 4.0, 5.0])}, "cu_seqlens_k must be a 1-D integer array"),  # the reference's message
        ({"cu_seqlens_k": np.array([0, 5], np.int32)}, "same length"),
        ({"causal": "yes"}, "causal must be True or False"),
        ({"scale": 0.0}, "scale must be"),
        ({"scale": float("nan")}, "scale must be"),
        ({"scale": 1e39}, "scale must be None or a finite nonzero real number with magnitude"),
    ],
)
def test_plan_rejects_bad_arguments(changes, match):
    with pytest.raises(ValueError, match=match):
        varlen_fwd.plan(KERNEL, _case(**changes), TARGET)


def test_plan_rejects_unknown_options():
    case = _case()
    case.options["window"] = (3, 0)
    with pytest.raises(ValueError, match="unknown options"):
        varlen_fwd.plan(KERNEL, case, TARGET)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"window": (4, 0)}, "window"),
        ({"softcap": 30.0}, "softcap"),
        ({"causal": True}, "causal_align"),  # bottom-right by default, and 3x4 / 2x1 differ
        ({"causal_align": "middle"}, "causal_align"),
    ],
)
def test_case_from_reference_refuses_what_the_interface_cannot_carry(kwargs, match):
    i = _inputs([3, 2], [4, 1])
    with pytest.raises(ValueError, match=match):
        varlen_fwd.case_from_reference(i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"], **kwargs)


def test_case_from_reference_refuses_gqa():
    i = _inputs([3, 2], [4, 1], heads=4)
    with pytest.raises(ValueError, match="GQA"):
        varlen_fwd.case_from_reference(i["q"], i["k"][:, :2], i["v"][:, :2], i["cu_seqlens_q"], i["cu_seqlens_k"])


def test_case_from_reference_matches_the_reference_call():
    from wgattn import reference

    # Equal lengths: bottom-right and top-left causal agree, so the default alignment is carried.
    i = _inputs([3, 0, 4], [3, 0, 4], dim=7, seed=2)
    args = (i["q"], i["k"], i["v"], i["cu_seqlens_q"], i["cu_seqlens_k"])
    case = varlen_fwd.case_from_reference(*args, causal=True, scale=0.3, name="eq")
    assert case.name == "eq" and case.options == {"causal": True, "scale": 0.3}
    got = varlen_fwd.reference(case)
    want = reference.varlen_attention_fwd(*args, causal=True, scale=0.3)
    np.testing.assert_array_equal(got["out"], want[0])
    np.testing.assert_array_equal(got["lse"], want[1])
    # Unequal lengths are fine with top-left alignment.
    j = _inputs([3, 2], [4, 1])
    case = varlen_fwd.case_from_reference(
        j["q"], j["k"], j["v"], j["cu_seqlens_q"], j["cu_seqlens_k"], causal=True, causal_align="top_left"
    )
    assert case.options["causal"] is True
