"""attn_probs.seed run natively (wgpu-py; lavapipe here) on its interface's conformance grid,
judged by the tolerance rule against the float64 reference; exact zeros outside the window, rows
summing to 1, other workgroup sizes, the interface's ValueErrors, and a planted race (the barrier
between the max and the sum reductions removed) that the harness must catch."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import TARGET, WIDE, ratio
from wgattn import conformance, registry
from wgattn.interfaces import Case
from wgattn.interfaces.attn_probs import INTERFACE as attn_probs

KERNEL = registry.load().kernel("attn_probs.seed")
CASES = attn_probs.conformance_cases()
# The barrier that separates reading the maximum out of the scratch from reusing it for the sum.
MAX_SUM_BARRIER = "  workgroupBarrier();  // max-sum separation\n"


def _visible(case: Case):
    """(earliest, pos): the visible keys are earliest..pos."""
    pos, window = case.options["pos"], case.options.get("window", 0)
    earliest = pos + 1 - window if window != 0 and pos + 1 >= window else 0
    return earliest, pos


def _probs(runtime, case: Case, **kwargs) -> np.ndarray:
    return runtime.run(attn_probs.plan(KERNEL, case, runtime.target, **kwargs)).outputs["probs"]


def test_grid_covers_the_contract():
    shapes = [(c.inputs["q"].shape, c.inputs["k_hist"].shape, c.options) for c in CASES]
    dims = {q[1] for q, _, _ in shapes}
    ratios = {q[0] // k[1] for q, k, _ in shapes}
    assert {1, 59, 64, 111, 256} <= dims
    assert {1, 3} <= ratios and any(k[1] == 1 and q[0] > 1 for q, k, _ in shapes)
    lens = {k[0] for _, k, _ in shapes}
    assert {1, 63, 65, 203} <= lens and max(lens) > 4096
    assert any(o["pos"] == 0 for _, _, o in shapes)
    assert any(o["pos"] == k[0] - 1 for _, k, o in shapes)
    assert any(0 < o["pos"] < k[0] - 1 for _, k, o in shapes)
    windows = [(o["window"], o["pos"]) for _, _, o in shapes]
    assert any(w == 0 for w, _ in windows) and any(w == 1 for w, _ in windows)
    assert any(w == p + 1 for w, p in windows) and any(w > p + 1 for w, p in windows)
    assert any(1 < w < p + 1 for w, p in windows)
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance(native_runtime, case):
    (row,) = conformance.run_case(native_runtime, KERNEL, case)
    assert row["output"] == "probs"
    assert row["pass"], (
        f"max abs err {row['max_abs_err']:.3e} > allowance {row['allowance']:.3e} (naive f32 {row['naive_err']:.3e})"
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_zero_outside_the_window_and_rows_sum_to_one(native_runtime, case):
    probs = _probs(native_runtime, case)
    earliest, pos = _visible(case)
    assert np.isfinite(probs).all()
    assert np.all(probs[:, :earliest] == 0.0)
    assert np.all(probs[:, pos + 1 :] == 0.0)
    assert np.all(probs >= 0.0)
    sums = probs.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(sums, 1.0, rtol=0, atol=1e-5)


@pytest.mark.parametrize("wg", [1, 7, 48, 64, 256])
def test_other_workgroup_sizes(native_runtime, wg):
    """WG need not be a power of two: the tree reductions pad it to the next one."""
    for case in CASES:
        if case.inputs["k_hist"].shape[0] > 5000:
            continue  # the 70000-key case adds time, not coverage, at WG 1
        (row,) = conformance.run_case(native_runtime, KERNEL, case, overrides={"WG": wg})
        assert row["pass"], (case.name, wg, row)


def test_gqa_head_mapping(native_runtime):
    """Query head h reads key head h // (Hq // Hkv): heads of one group see the same keys."""
    rng = np.random.RandomState(3)
    k = rng.standard_normal((40, 2, 8)).astype(np.float32)
    q0 = rng.standard_normal((1, 8)).astype(np.float32)
    q = np.repeat(q0, 6, axis=0)  # every query head identical
    probs = _probs(native_runtime, attn_probs.case_from_reference(q, k, pos=39))
    np.testing.assert_array_equal(probs[0], probs[2])
    np.testing.assert_array_equal(probs[3], probs[5])
    assert np.abs(probs[0] - probs[3]).max() > 1e-3  # key heads 0 and 1 differ


def _case(q_shape=(4, 8), k_shape=(10, 2, 8), **options):
    options.setdefault("pos", 3)
    return Case("bad", {"q": np.zeros(q_shape, np.float32), "k_hist": np.zeros(k_shape, np.float32)}, options)


@pytest.mark.parametrize(
    "case, match",
    [
        (_case(q_shape=(4, 8, 1)), "^q must be 2-D"),
        (_case(k_shape=(10, 16)), "^k_hist must be 3-D"),
        (_case(q_shape=(4, 0), k_shape=(10, 2, 0)), "^q head dim"),
        (_case(k_shape=(10, 2, 9)), "^k_hist head dim"),
        (_case(k_shape=(10, 3, 8)), r"^q heads \(4\) must be a multiple of k_hist heads \(3\)"),
        (_case(k_shape=(0, 2, 8), pos=0), "^k_hist must hold at least one key"),
        (_case(pos=10), r"^pos must be in \[0, history_len\) = \[0, 10\)"),
        (_case(pos=-1), "^pos must be"),
        (_case(pos=2.0), "^pos must be"),
        (_case(window=-1), "^window must be an integer >= 0"),
        (_case(window=1.5), "^window must be"),
        (_case(scale=0.5), "^attn_probs options are"),
    ],
)
def test_plan_value_errors(case, match):
    with pytest.raises(ValueError, match=match):
        attn_probs.plan(KERNEL, case, TARGET)


def test_plan_value_errors_inputs():
    with pytest.raises(ValueError, match="^pos must be given"):
        attn_probs.plan(KERNEL, Case("x", {"q": np.zeros((1, 1), np.float32), "k_hist": np.zeros((1, 1, 1), np.float32)}), TARGET)
    with pytest.raises(ValueError, match="missing"):
        attn_probs.plan(KERNEL, Case("x", {"q": np.zeros((1, 1), np.float32)}, {"pos": 0}), TARGET)
    with pytest.raises(ValueError, match="^q must be a float"):
        attn_probs.plan(
            KERNEL, Case("x", {"q": np.zeros((1, 1), np.int32), "k_hist": np.zeros((1, 1, 1), np.float32)}, {"pos": 0}), TARGET
        )


def test_case_from_reference_refuses_other_scales():
    q = np.zeros((2, 4), np.float32)
    k = np.zeros((5, 1, 4), np.float32)
    assert attn_probs.case_from_reference(q, k, pos=4, window=2).options == {"pos": 4, "window": 2}
    for scale in (0.5, None, -1.0):
        with pytest.raises(ValueError, match="^scale must be 1.0 for attn_probs, whose scores are un-scaled"):
            attn_probs.case_from_reference(q, k, pos=4, scale=scale)
    with pytest.raises(ValueError, match="^pos must be"):
        attn_probs.case_from_reference(q, k, pos=5)


def test_plan_layout():
    case = CASES[4]
    plan = attn_probs.plan(KERNEL, case, TARGET)
    hq, d = case.inputs["q"].shape
    length, hkv, _ = case.inputs["k_hist"].shape
    assert [b.name for b in plan.buffers] == ["params", "q", "k_hist", "probs"]
    assert [b.name for b in plan.buffers if b.read] == ["probs"]
    (dispatch,) = plan.dispatches
    assert dispatch.entry_point == "main" and dispatch.workgroups == (hq, 1, 1)
    assert dispatch.bindings == {0: "params", 1: "q", 2: "k_hist", 3: "probs"}
    fields = np.frombuffer(plan.buffers[0].data, dtype="<u4")
    assert list(fields) == [d, hq, hkv, hq // hkv, case.options["pos"], length, case.options["window"], 0]


def test_reference_matches_attention_probs():
    case = CASES[8]
    from wgattn.reference import attention_probs

    want = attention_probs(
        case.inputs["q"], case.inputs["k_hist"], pos=case.options["pos"], window=case.options["window"], scale=1.0
    )
    np.testing.assert_array_equal(attn_probs.reference(case)["probs"], want)
    assert attn_probs.reference(case, dtype=np.float32)["probs"].dtype == np.float32


def test_planted_race_is_caught(native_runtime):
    """Without the barrier between reading the maximum and reusing the scratch for the sum, the
    first invocations overwrite scratch[0] with their partial sums before the others have read
    the maximum. lavapipe runs a workgroup's invocations in fixed batches, each to the next
    barrier before the next batch starts, so on it the race shows on every case with two or more
    visible keys, every time. (With one visible key the probability is exp(s - m') / exp(s - m')
    = 1 whatever m' the race leaves, so those cases cannot show it.) Other drivers schedule a
    workgroup otherwise and may hide the race on some cases: the test runs on lavapipe alone."""
    if "llvmpipe" not in native_runtime.name:
        pytest.skip(f"the race shows on every case only with lavapipe's scheduling, not {native_runtime.name}'s")
    source = KERNEL.source()
    assert source.count(MAX_SUM_BARRIER) == 1
    racy = source.replace(MAX_SUM_BARRIER, "")
    caught = {}
    for case in CASES:
        earliest, pos = _visible(case)
        if pos - earliest + 1 < 2:
            continue
        caught[case.name] = ratio(conformance.run_case(native_runtime, KERNEL, case, source=racy)) >= WIDE
    assert len(caught) >= 10
    assert all(caught.values()), [name for name, hit in caught.items() if not hit]
    # And with every barrier removed (the tree reductions then read unwritten scratch too).
    bare = source.replace("workgroupBarrier();", "")
    for case in CASES[1:3]:
        assert ratio(conformance.run_case(native_runtime, KERNEL, case, source=bare)) >= WIDE, case.name
