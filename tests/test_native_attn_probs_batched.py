"""The attn_probs_batched kernels run natively (wgpu-py; lavapipe here) against the float64 reference,
judged by the tolerance rule: the whole conformance grid for every kernel whose features the
adapter has; exact zeros outside the window and every entry written; other workgroup sizes
(partial subgroups included); the block and grid folding; planted bugs (a missing barrier between
the reductions, window edges one key off) that the grid must catch; named ValueErrors."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import TARGET, WIDE, failures, first_wide_failure, needs_features, ratio
from wgattn import conformance, reference, registry
from wgattn.interfaces import Case
from wgattn.interfaces.attn_probs_batched import INTERFACE as apb

REG = registry.load()
KERNELS = REG.kernels_of("attn_probs_batched")
CASES = apb.conformance_cases()
FAST = REG.kernel("attn_probs_batched.fast")
SUBGROUP = REG.kernel("attn_probs_batched.subgroup")
# The barrier between every invocation's reading of the maxima and the reuse of the same workgroup
# memory for the sums, in both kernels.
MAX_SUM_BARRIER = "  workgroupBarrier();  // max-sum separation\n"


def _visible(case: Case):
    """[(earliest, p)] per query row: the visible keys are earliest..p."""
    window = case.options["window"]
    return [(p + 1 - window if window != 0 and p + 1 >= window else 0, p) for p in (int(x) for x in case.inputs["positions"])]


def test_grid_is_broad():
    q_shapes = [c.inputs["q"].shape for c in CASES]
    k_shapes = [c.inputs["k_hist"].shape for c in CASES]
    assert {1, 7, 64, 128, 256} <= {q[2] for q in q_shapes}
    lens = {k[0] for k in k_shapes}
    assert {1, 5, 63, 64, 65} <= lens and any(4096 <= n for n in lens) and max(lens) > 16384
    ratios = {q[1] // k[1] for q, k in zip(q_shapes, k_shapes)}
    assert {1, 2, 4} <= ratios
    assert any(k[1] == 1 and q[1] > 1 for q, k in zip(q_shapes, k_shapes))  # MQA
    windows = [(c.options["window"], c) for c in CASES]
    assert any(w == 0 for w, _ in windows) and any(w == 1 for w, _ in windows)
    assert any(1 < w < 10 for w, _ in windows)  # small
    assert any(w > 0 and all(w > p + 1 for _, p in _visible(c)) for w, c in windows)  # larger than pos
    assert any(
        w > 0 and any(0 < e for e, _ in _visible(c)) and any(e == 0 for e, _ in _visible(c)) for w, c in windows
    )  # in between: clipped rows and unclipped rows in one case
    positions = [list(c.inputs["positions"]) for c in CASES]
    hist = [k[0] for k in k_shapes]
    assert any(0 in p and n - 1 in p and n > 1 for p, n in zip(positions, hist))
    assert any(len(set(p)) < len(p) for p in positions)  # repeats
    assert any(p != sorted(p) for p in positions)  # any order
    assert any(abs(c.options["scale"]) != 1.0 for c in CASES)
    assert any("sd100" in c.name or "off+100" in c.name for c in CASES)  # scores of magnitude ~100
    assert len({c.name for c in CASES}) == len(CASES)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_kernel_matches_reference(native_runtime, kernel, case):
    needs_features(native_runtime, kernel)
    rows = conformance.run_case(native_runtime, kernel, case)
    assert [r["output"] for r in rows] == list(apb.OUTPUTS)
    bad = failures(rows)
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_exact_zeros_outside_the_window_and_every_entry_written(native_runtime, kernel):
    """probs starts as NaN: every entry must be overwritten, invisible ones with exactly 0."""
    needs_features(native_runtime, kernel)
    for case in CASES:
        plan = apb.plan(kernel, case, TARGET)
        (probs_buf,) = [b for b in plan.buffers if b.name == "probs"]
        probs_buf.data = np.full(probs_buf.size // 4, np.nan, dtype=np.float32).tobytes()
        probs = native_runtime.run(plan).outputs["probs"]
        assert np.isfinite(probs).all(), case.name
        for i, (lo, p) in enumerate(_visible(case)):
            assert np.all(probs[i, :, :lo] == 0.0), (case.name, i)
            assert np.all(probs[i, :, p + 1 :] == 0.0), (case.name, i)
            assert np.all(probs[i, :, lo : p + 1] >= 0.0), (case.name, i)
        sums = probs.astype(np.float64).sum(axis=2)
        np.testing.assert_allclose(sums, 1.0, rtol=0, atol=1e-5, err_msg=case.name)


@pytest.mark.parametrize("wg", [1, 7, 48, 64, 100, 256])
@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
def test_other_workgroup_sizes(native_runtime, kernel, wg):
    """WG need not be a power of two (the tree reductions pad it), nor a multiple of the subgroup
    size (7, 48 and 100 leave a partial subgroup wherever subgroups hold 8, 16, 32 or 64)."""
    needs_features(native_runtime, kernel)
    for case in CASES:
        if wg < 48 and case.inputs["k_hist"].shape[0] > 5000:
            continue  # the 20000-key case adds time, not coverage, at tiny WG
        rows = conformance.run_case(native_runtime, kernel, case, overrides={"WG": wg})
        assert not failures(rows), (case.name, wg, failures(rows))


def test_blocks_fold_past_65535_workgroups(native_runtime):
    """262148 rows of one head: 65537 blocks, folded into (65535, 2) workgroups and unfolded by
    the kernel; checked against the reference on a sample of rows, the last ones included."""
    rs = np.random.RandomState(8)
    n_pos = 4 * 65537
    q = rs.standard_normal((n_pos, 1, 3)).astype(np.float32)
    k = rs.standard_normal((5, 1, 3)).astype(np.float32)
    positions = rs.randint(0, 5, size=n_pos)
    case = apb.case_from_reference(q, k, positions, window=3)
    for kernel in KERNELS:
        plan = apb.plan(kernel, case, TARGET)
        assert plan.dispatches[0].workgroups == (65535, 2, 1)
        if kernel.requires and "subgroup" not in native_runtime.features:
            continue
        probs = native_runtime.run(plan).outputs["probs"]
        sample = np.concatenate([rs.randint(0, n_pos, size=200), np.arange(n_pos - 8, n_pos)])
        want = reference.attention_probs_batched(q[sample], k, positions[sample], window=3)
        assert np.abs(probs[sample] - want).max() < 1e-6, kernel.id


def test_gqa_head_mapping_and_blocks(native_runtime):
    """Query head h reads key head h // (Hq // Hkv); heads of one group with equal queries get
    equal rows, in blocks mixing positions and heads (GQA 2: 2 positions x 2 heads per block)."""
    rs = np.random.RandomState(3)
    k = rs.standard_normal((40, 3, 8)).astype(np.float32)
    q1 = rs.standard_normal((5, 1, 8)).astype(np.float32)
    q1[2] = q1[0]  # position 39 twice, with the same queries
    q = np.repeat(q1, 6, axis=1)  # every query head of a position identical
    case = apb.case_from_reference(q, k, [39, 12, 39, 0, 25])
    for kernel in KERNELS:
        if kernel.requires and "subgroup" not in native_runtime.features:
            continue
        probs = native_runtime.run(apb.plan(kernel, case, native_runtime.target)).outputs["probs"]
        np.testing.assert_array_equal(probs[:, 0], probs[:, 1])
        np.testing.assert_array_equal(probs[:, 4], probs[:, 5])
        np.testing.assert_array_equal(probs[0], probs[2])  # repeated position, same queries
        assert np.abs(probs[0, 0] - probs[0, 2]).max() > 1e-3  # key heads 0 and 1 differ
        want = reference.attention_probs_batched(q, k, [39, 12, 39, 0, 25])
        assert np.abs(probs - want).max() < 1e-6


# Bugs the grid must catch: (kernel, text in the kernel, replacement).
PLANTED = {
    "fast: no barrier between the max and the sum reductions": (FAST, MAX_SUM_BARRIER, ""),
    "subgroup: no barrier between the max and the sum reductions": (SUBGROUP, MAX_SUM_BARRIER, ""),
    "window one key too wide on the left": (FAST, "lo[r] = p + 1u - params.window;", "lo[r] = p - params.window;"),
    "window one key too narrow on the left": (FAST, "lo[r] = p + 1u - params.window;", "lo[r] = p + 2u - params.window;"),
    "the key after the current one let in": (FAST, "hi[r] = p + 1u;", "hi[r] = min(p + 2u, hist);"),
    "the current key left out": (FAST, "hi[r] = p + 1u;", "hi[r] = max(p, 1u);"),
    "the second key of each pair dropped": (FAST, "      if (tk < hi_any) {", "      if (tk < hi_any && j == 0u) {"),
    "the second key scored against the first key's row": (FAST, "min(t + WG, hi_any - 1u) * kv_stride", "t * kv_stride"),
    "subgroup: slots numbered from the leader's local index": (
        SUBGROUP,
        "sg_part[slot] = l_sg;",
        "sg_part[min(lid, n_sg - 1u)] = l_sg;",
    ),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_are_caught(native_runtime, bug):
    kernel, old, new = PLANTED[bug]
    needs_features(native_runtime, kernel)
    source = kernel.source()
    assert source.count(old) == 1, f"planted bug {bug!r} no longer matches {kernel.id}"
    caught = first_wide_failure(native_runtime, kernel, CASES, source.replace(old, new))
    assert caught, f"no grid case fails {WIDE}x its allowance or more: {bug}"


def test_planted_race_fails_every_case_it_can_show():
    """lavapipe runs a workgroup's invocations in fixed batches, each to the next barrier before the
    next starts: without the max-sum barrier the first batch's partial sums overwrite the maxima
    before the later batches have read them. That changes the result wherever later batches own
    visible keys: on every case with a row of 64 or more visible keys."""
    pytest.importorskip("wgpu")
    from wgattn import native

    rt = native.runtime()
    if "llvmpipe" not in rt.name:
        pytest.skip("the race shows on every case only with lavapipe's scheduling")
    racy = FAST.source().replace(MAX_SUM_BARRIER, "")
    caught = {}
    for case in CASES:
        if max(p - lo + 1 for lo, p in _visible(case)) < 64:
            continue  # (with one visible key per row the probability is 1 whatever the race leaves)
        caught[case.name] = ratio(conformance.run_case(rt, FAST, case, source=racy)) >= WIDE
    assert len(caught) >= 10
    assert all(caught.values()), [name for name, hit in caught.items() if not hit]


def test_plan_layout_and_vec4_padding():
    (case,) = [c for c in CASES if c.inputs["q"].shape[2] == 7]
    n_pos, hq, d = case.inputs["q"].shape
    length, hkv, _ = case.inputs["k_hist"].shape
    plan = apb.plan(FAST, case, TARGET)
    assert [b.name for b in plan.buffers] == ["params", "q", "k_hist", "positions", "probs"]
    assert [b.name for b in plan.buffers if b.read] == ["probs"]
    (dispatch,) = plan.dispatches
    assert dispatch.entry_point == "main"
    assert dispatch.bindings == {0: "params", 1: "q", 2: "k_hist", 3: "positions", 4: "probs"}
    assert dispatch.workgroups == (hkv * -(-(hq // hkv) * n_pos // 4), 1, 1)
    fields = np.frombuffer(plan.buffers[0].data, dtype="<u4")
    assert list(fields[:7]) == [d, hq, hkv, hq // hkv, n_pos, length, case.options["window"]]
    assert np.frombuffer(plan.buffers[0].data, dtype="<f4")[7] == case.options["scale"]
    q4 = np.frombuffer(plan.buffers[1].data, dtype=np.float32).reshape(n_pos, hq, 8)
    np.testing.assert_array_equal(q4[:, :, :7], case.inputs["q"])
    assert np.all(q4[:, :, 7] == 0.0)
    k4 = np.frombuffer(plan.buffers[2].data, dtype=np.float32).reshape(length, hkv, 8)
    assert np.all(k4[:, :, 7] == 0.0)
    np.testing.assert_array_equal(np.frombuffer(plan.buffers[3].data, dtype=np.uint32), case.inputs["positions"])


def test_subgroup_kernel_enables_subgroups_and_only_the_native_compiler_drops_it():
    """The WGSL file says `enable subgroups;` (browsers require it); plans carry it as written (one
    WGSL for every runtime); only wgpu-native's compile step comments it out (its naga refuses it)."""
    from wgattn import native

    assert SUBGROUP.source().startswith("enable subgroups;\n")
    assert SUBGROUP.requires == ("subgroups",) and FAST.requires == ()
    (dispatch,) = apb.plan(SUBGROUP, CASES[0], TARGET).dispatches
    assert dispatch.source == SUBGROUP.source()
    assert dispatch.requires == ("subgroups",)
    shimmed = native._for_naga(dispatch.source)
    assert "\nenable subgroups;" not in "\n" + shimmed
    assert shimmed.replace("// enable subgroups; (naga: implied by the device feature)", "enable subgroups;") == dispatch.source


def test_reference_and_case_from_reference():
    case = CASES[4]
    i = case.inputs
    want = reference.attention_probs_batched(
        i["q"], i["k_hist"], i["positions"], window=case.options["window"], scale=case.options["scale"]
    )
    np.testing.assert_array_equal(apb.reference(case)["probs"], want)
    assert apb.reference(case, dtype=np.float32)["probs"].dtype == np.float32
    # The benchmark's call (bench.py): q [b, h, d], k_hist [s, h, d], positions keyword.
    q = np.zeros((3, 2, 5), np.float32)
    k = np.zeros((10, 2, 5), np.float32)
    c = apb.case_from_reference(q, k, positions=np.arange(7, 10))
    assert c.options == {"window": 0, "scale": 1.0}
    assert c.inputs["positions"].dtype == np.int32 and list(c.inputs["positions"]) == [7, 8, 9]
    assert apb.case_from_reference(q, k, [1, 2, 3], scale=None).options["scale"] == pytest.approx(5**-0.5)


def _bad_case(q_shape=(3, 4, 8), k_shape=(10, 2, 8), positions=(9, 0, 4), **options):
    inputs = {"q": np.zeros(q_shape, np.float32), "k_hist": np.zeros(k_shape, np.float32), "positions": np.asarray(positions)}
    return Case("bad", inputs, options)


@pytest.mark.parametrize(
    "case, match",
    [
        (_bad_case(q_shape=(4, 8)), r"^q must be 3-D with shape \[n_pos, Hq, D\]"),
        (_bad_case(k_shape=(10, 16)), r"^k_hist must be 3-D"),
        (_bad_case(q_shape=(3, 4, 0), k_shape=(10, 2, 0)), r"^q head dim D must be >= 1"),
        (_bad_case(k_shape=(10, 2, 9)), r"^k_hist head dim must equal q head dim 8"),
        (_bad_case(k_shape=(10, 3, 8)), r"^q heads \(4\) must be a multiple of k_hist heads \(3\)"),
        (_bad_case(k_shape=(0, 2, 8)), r"^k_hist must hold at least one key"),
        (_bad_case(positions=[[9, 0, 4]]), r"^positions must be a 1-D integer array of length n_pos = 3"),
        (_bad_case(positions=[9.0, 0.0, 4.0]), r"^positions must be a 1-D integer array, got dtype float64"),
        (_bad_case(positions=[9, 0]), r"^positions must have one entry per query row: length n_pos = q.shape\[0\] = 3"),
        (_bad_case(positions=[9, 10, 4]), r"^positions\[1\] must be in \[0, history_len\) = \[0, 10\), got 10"),
        (_bad_case(positions=[-1, 0, 4]), r"^positions\[0\] must be in \[0, history_len\)"),
        (_bad_case(window=-1), r"^window must be an integer >= 0 \(0 = unbounded\), got -1"),
        (_bad_case(window=1.5), r"^window must be an integer >= 0"),
        (_bad_case(scale=0.0), r"^scale must be None or a finite nonzero real number with magnitude in .*, got 0.0"),
        (_bad_case(scale=float("inf")), r"^scale must be None or a finite nonzero"),
        (_bad_case(scale=1e39), r"^scale must be None or a finite nonzero real number with magnitude"),
        (_bad_case(scale="1"), r"^scale must be None or a finite nonzero"),
        (_bad_case(pos=3), r"^attn_probs_batched options are \['window', 'scale'\], got unknown \['pos'\]"),
    ],
)
def test_plan_value_errors(case, match):
    with pytest.raises(ValueError, match=match):
        apb.plan(FAST, case, TARGET)


def test_missing_and_float_inputs_are_named():
    with pytest.raises(ValueError, match=r"needs inputs \['q', 'k_hist', 'positions'\], missing \['positions'\]"):
        apb.plan(FAST, Case("x", {"q": np.zeros((1, 1, 1), np.float32), "k_hist": np.zeros((1, 1, 1), np.float32)}), TARGET)
    with pytest.raises(ValueError, match=r"^q must be a float16, float32 or float64 array"):
        apb.case_from_reference(np.zeros((1, 1, 1), np.int32), np.zeros((1, 1, 1), np.float32), [0])
    with pytest.raises(ValueError, match=r"^positions\[0\] must be in"):
        apb.case_from_reference(np.zeros((1, 1, 1), np.float32), np.zeros((1, 1, 1), np.float32), [1])
