"""Localising a disagreement (wgattn.localise): where (sequence, row, head, key range),
an |error| map, and the likely class, on planted errors of known kind and on a planted kernel
that trusts the tanh built-in."""

import numpy as np
import pytest

from helpers import WIDE, ratio
from wgattn import conformance, reference, registry
from wgattn.interfaces import Case
from wgattn.interfaces.varlen_bwd import INTERFACE as varlen_bwd
from wgattn.localise import localise, render


def _case(options, seqs=((40, 25), (10, 30), (0, 5)), hq=4, hkv=2, d=8, seed=3):
    rs = np.random.RandomState(seed)
    return varlen_bwd.grid_case(rs, name="t", seqs=list(seqs), hq=hq, hkv=hkv, d=d, options=dict(options), amp=1.0)


@pytest.mark.parametrize(
    "options",
    [
        {"causal": True},
        {"causal": True, "causal_align": "top_left"},
        {"window": (3, 2)},
        {"window": (0, -1), "causal_align": "top_left"},
        {},
    ],
)
def test_key_and_query_ranges_match_the_reference_mask(options):
    case = _case(options)
    cu_q, cu_k = case.inputs["cu_seqlens_q"], case.inputs["cu_seqlens_k"]
    left, right = options.get("window", (-1, -1))
    right = reference.effective_right(options.get("causal", False), right)
    rows = varlen_bwd.geometry(case, "dq", case.inputs["q"].shape)
    keys = varlen_bwd.geometry(case, "dk", case.inputs["k"].shape)
    for b in range(len(cu_q) - 1):
        lq, lk = int(cu_q[b + 1] - cu_q[b]), int(cu_k[b + 1] - cu_k[b])
        mask = reference.seq_mask(lq, lk, options.get("causal_align", "bottom_right"), left, right)
        for i in range(lq):
            t = int(cu_q[b]) + i
            seen = np.flatnonzero(mask[i])
            assert rows["terms"][t] == seen.size
            if seen.size:
                assert (rows["lo"][t], rows["hi"][t]) == (seen[0], seen[-1])
        for j in range(lk):
            t = int(cu_k[b]) + j
            seen = np.flatnonzero(mask[:, j])
            assert keys["terms"][t] == seen.size * 2  # a group of 2 query heads per kv head
            if seen.size:
                assert (keys["lo"][t], keys["hi"][t]) == (seen[0], seen[-1])


def test_a_value_where_the_reference_is_masked_is_a_mask_edge():
    case = _case({"causal": True})  # bottom-right, 40 queries on 25 keys: 15 rows see no key
    ref = varlen_bwd.reference(case)["dq"]
    got = ref.astype(np.float32).copy()
    got[3, 1, 5] = 0.25  # row 3 of sequence 0 sees no key: dq must be 0 there
    loc = localise(case, "dq", got, ref, allowance=1e-6, interface=varlen_bwd)
    assert loc["likely"] == "mask edge"
    w = loc["worst"][0]
    assert (w["sequence"], w["row"], w["head"], w["column"], w["terms"]) == (0, 3, 1, 5, 0)
    assert w["keys"][1] < w["keys"][0]  # an empty range
    assert max(max(r) for r in loc["map"]["ratio"]) == pytest.approx(0.25 / 1e-6, rel=1e-3)


def test_error_growing_with_the_terms_summed_is_summation_order():
    case = _case({"causal": True}, seqs=((200, 200), (60, 20)))  # early keys: many queries
    ref = varlen_bwd.reference(case)["dv"]
    geo = varlen_bwd.geometry(case, "dv", ref.shape)
    rs = np.random.RandomState(0)
    err = 1e-7 * geo["terms"][:, None, None] * rs.uniform(0.5, 1.0, ref.shape)
    loc = localise(case, "dv", ref + err, ref, allowance=1e-6, interface=varlen_bwd)
    assert loc["likely"] == "summation order", loc["evidence"]


def test_a_per_term_shift_is_built_in_precision():
    case = _case({"causal": True}, seqs=((100, 100),))
    ref = varlen_bwd.reference(case)["dq"]
    geo = varlen_bwd.geometry(case, "dq", ref.shape)
    rs = np.random.RandomState(0)
    # worst where a row sums the fewest keys: each term's error weighs most there
    err = 1e-6 / np.maximum(geo["terms"], 1)[:, None, None] * rs.uniform(0.5, 1.0, ref.shape)
    loc = localise(case, "dq", ref + err, ref, allowance=1e-7, interface=varlen_bwd)
    assert loc["likely"] == "built-in precision", loc["evidence"]
    named = localise(case, "dq", ref + err, ref, allowance=1e-7, suspects=["tanh: 687971 ulps"], interface=varlen_bwd)
    assert named["likely"] == "built-in precision" and "tanh: 687971 ulps" in " ".join(named["evidence"])


def test_judge_localises_only_failing_outputs():
    case = _case({"softcap": 5.0})
    ref = varlen_bwd.reference(case)
    naive = varlen_bwd.reference(case, dtype=np.float32)
    got = {k: v.astype(np.float32) for k, v in ref.items()}
    got["dk"] = got["dk"] + np.float32(1e-3)
    rows = {r["output"]: r for r in conformance.judge(case, got, ref, naive, interface=varlen_bwd)}
    assert rows["dq"]["pass"] and "where" not in rows["dq"]
    assert not rows["dk"]["pass"] and rows["dk"]["where"]["output"] == "dk"
    assert rows["dk"]["where"]["worst"][0]["err"] == pytest.approx(1e-3, rel=1e-3)


def test_suspects_are_builtins_the_kernel_calls_that_the_probe_found_off():
    probe = {
        "functions": [
            {"name": "tanh", "max_ulps": 7e5, "max_abs": 1.4e-7},
            {"name": "exp2", "max_ulps": 3.0, "max_abs": 1e-7},
            {"name": "log", "max_ulps": 4000.0, "max_abs": 1e-6},
        ]
    }
    assert conformance.suspects("let t = tanh(x); // tanh(", probe) == ["tanh: 700000 ulps (abs 1.4e-07)"]
    assert conformance.suspects("// only a comment: tanh(x)\nlet y = log(x);", probe) == []
    assert conformance.suspects("let t = tanh(x);", None) == []


def test_a_kernel_trusting_tanh_is_caught_and_explained(native_runtime):
    """The built-in tanh planted back into varlen_bwd.seed: where the adapter's tanh is imprecise
    near 0 (Vulkan lets it inherit exp's error), a kernel trusting it fails, and the report names
    tanh. The softcap/MQA grid case with a cap of 1000 puts every score s/cap near 0, where the
    built-in is weakest: there the planted kernel fails by about 30x its allowance on lavapipe,
    while with the grid's cap of 50 it failed by 0.8-1.5x depending on the CPU's rounding."""
    tanh = {r["name"]: r for r in native_runtime.precision()["functions"]}["tanh"]
    if tanh["max_ulps"] <= conformance.SUSPECT_ULPS:
        pytest.skip(f"this adapter's tanh is accurate ({tanh['max_ulps']:.1f} ulps): the planted bug cannot show")
    kernel = registry.load().kernel("varlen_bwd.seed")
    source = kernel.source()  # the WGSL as compiled: the lib #included
    fixed = "dfac = softcap_slope(s, params.softcap);  // from the uncapped score\n    s = softcap_apply(s, params.softcap);"
    assert fixed in source
    planted = source.replace(fixed, "let t = tanh(s / params.softcap);\n    s = params.softcap * t;\n    dfac = 1.0 - t * t;")
    grid = next(c for c in varlen_bwd.conformance_cases() if c.name.startswith("softcap50-causal-br-mqa6"))
    x, opts = grid.inputs, dict(grid.options, softcap=1000.0)
    args = (x["q"], x["k"], x["v"], x["cu_seqlens_q"], x["cu_seqlens_k"])
    keywords = {k: opts[k] for k in ("causal", "window", "softcap", "causal_align", "scale")}
    out, lse = reference.varlen_attention_fwd(*args, **keywords)
    case = varlen_bwd.case_from_reference(
        x["dout"], *args[:3], out.astype(np.float32), lse.astype(np.float32), *args[3:], name="softcap1000", **keywords
    )
    rows = conformance.run_case(native_runtime, kernel, case, source=planted)
    assert ratio(rows) >= WIDE, [(r["output"], r["max_abs_err"] / r["allowance"]) for r in rows]
    for r in (r for r in rows if not r["pass"]):
        assert r["where"]["likely"] == "built-in precision"
        assert any("tanh" in e for e in r["where"]["evidence"])
    assert all(r["pass"] for r in conformance.run_case(native_runtime, kernel, case))  # the real kernel


def test_a_gross_error_without_geometry_is_a_mask_edge():
    """An interface without packed sequences (sdpa's [B, H, S, D]): a row computed over the wrong
    keys is off by far more than float32 rounding, everywhere; not a built-in's precision."""
    rs = np.random.RandomState(1)
    ref = rs.standard_normal((1, 2, 16, 8))
    got = ref.copy()
    got[:, :, 1:, :] += 0.05 * rs.standard_normal((1, 2, 15, 8))  # every row but the first
    loc = localise(Case("sdpa-like", {}), "out", got, ref, allowance=1e-6)
    assert loc["likely"] == "mask edge", loc["evidence"]
    assert loc["worst"][0]["index"][2] >= 1 and "sequence" not in loc["worst"][0]


def test_shape_mismatch_is_reported_as_one_line_of_evidence():
    """A runtime that returns the wrong shape is localised with its evidence as a list of lines
    (the table and the page join them): it was a bare string, which the CLI table joined letter by
    letter and the page's `evidence.join` could not join at all."""
    ref = np.zeros((4, 2, 8))
    loc = localise(Case("short", {}), "out", np.zeros((3, 2, 8)), ref, allowance=1e-6)
    assert loc["evidence"] == ["shape [3, 2, 8] instead of [4, 2, 8]"]
    assert render(loc)[0] == "    out: likely localised (shape [3, 2, 8] instead of [4, 2, 8])"


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_sdpa_s_failure_is_named_by_its_axes(layout):
    """sdpa's out is [B, H, S, D] (or [B, S, H, D]): the map's rows are heads and its columns
    blocks of queries whatever the layout (batch was taken for rows and head or sequence for
    heads), and a failing element is named by its axes, not a bare index."""
    from wgattn.interfaces.sdpa_arena import INTERFACE as sdpa

    case = Case("t", {}, options={"layout": layout})
    shape = (2, 3, 16, 4) if layout == "bhsd" else (2, 16, 3, 4)
    ref = np.zeros(shape)
    got = ref.copy()
    at = (1, 2, 13, 3) if layout == "bhsd" else (1, 13, 2, 3)  # batch 1, head 2, query 13, dim 3
    got[at] = 1.0
    loc = localise(case, "out", got, ref, allowance=1e-3, interface=sdpa)
    names = ["batch", "head", "query", "dim"] if layout == "bhsd" else ["batch", "query", "head", "dim"]
    assert loc["axes"] == names and loc["worst"][0]["index"] == list(at)
    m = loc["map"]
    assert (m["rows"], m["blocks_of"]) == ("head", "query") and len(m["ratio"]) == 3  # 3 heads
    hot = [(h, j) for h, row in enumerate(m["ratio"]) for j, r in enumerate(row) if r > 1]
    (block,) = [j for h, j in hot if h == 2]
    assert m["blocks"][block][0] <= 13 < m["blocks"][block][1] and len(hot) == 1
    named = ", ".join(f"{n} {i}" for n, i in zip(names, at))  # "batch 1, head 2, query 13, dim 3"
    assert f"{named}: got 1 ref 0" in "\n".join(render(loc))
