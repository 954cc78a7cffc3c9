"""The decode kernels (shaders/decode.split.wgsl) run natively (wgpu-py; lavapipe here) through
wgattn.decode_plan, judged against wgattn.reference.decode_attention by the tolerance rule: an
awkward grid (block sizes 16 and 64, lengths ending mid-block, idle slots, a 16k-token sequence,
GQA 8:1 and MQA, 1 and 5 new tokens, sinks, ALiBi, windows, softcap, f32 and f16 caches, forced
split counts with empty splits), planted bugs caught by a wide margin, the kernel's own guards,
the tile and split rules, and what the plan refuses."""

from __future__ import annotations

import re

import numpy as np
import pytest
from test_reference_decode import paged

from helpers import WIDE, workgroup_storage
from wgattn import decode_plan, reference, tolerance
from wgattn.registry import DEFAULT_LIMITS

SPLIT = decode_plan.KERNELS

# name -> (lens, Sq_new, Hq, Hkv, D, block_size, options, f16 cache, num_splits)
GRID = {
    "gqa8-one-new-bs16-mid-block-idle": ([37, 0, 100, 16], 1, 16, 2, 64, 16, {}, False, None),
    "gqa8-five-new-bs64-sinks": ([130, 5, 0, 64], 5, 16, 2, 128, 64, {"sinks": "on"}, False, None),
    "mqa32-five-new-row-blocks-alibi": ([77, 300], 5, 32, 1, 64, 16, {"alibi": "on"}, False, 3),
    "mqa-window-softcap-d59": ([200, 9], 3, 6, 1, 59, 16, {"window_left": 31, "softcap": 10.0, "scale": 0.2}, False, None),
    "f16-everything-d128": (
        [500, 0, 77],
        5,
        16,
        2,
        128,
        64,
        {"window_left": 100, "softcap": 20.0, "alibi": "on", "sinks": "on"},
        True,
        4,
    ),
    "f16-gqa8-one-new-bs16-d59": ([61, 16, 0], 1, 8, 1, 59, 16, {"sinks": "on"}, True, 2),
    "more-splits-than-tiles": ([40, 3], 2, 4, 2, 64, 16, {"alibi": "on"}, False, 7),
    "one-split-2000-keys": ([2000, 1], 1, 4, 1, 64, 64, {"softcap": 30.0, "scale": 0.05}, False, 1),
    "window0-block1": ([50, 2], 2, 4, 4, 32, 1, {"window_left": 0}, False, 3),
    "d256-gqa2-bs16": ([100, 33], 1, 4, 2, 256, 16, {"sinks": "on"}, False, None),
    "long-16k-gqa4": ([16421], 1, 8, 2, 128, 64, {}, False, None),
    "long-12k-f16-gqa8-five-new-sinks-alibi": ([12007], 5, 8, 1, 64, 16, {"sinks": "on", "alibi": "on"}, True, None),
    "long-9k-window-mqa": ([9000, 4096], 5, 8, 1, 64, 64, {"window_left": 1500, "softcap": 25.0}, False, None),
}
FAST = [n for n in GRID if not n.startswith("long")]


def _inputs(name):
    """q, the paged cache (blocks scattered in a shuffled order, spare table entries -1),
    block_table, seq_lens and the keywords of one grid case."""
    lens, sq, hq, hkv, d, bs, opts, f16, ns = GRID[name]
    rs = np.random.RandomState(sum(map(ord, name)))
    q, k_cache, v_cache, table, seq_lens = paged(rs, lens, sq, hq, hkv, d, bs)
    cache = np.float16 if f16 else np.float32
    q, k_cache, v_cache = q.astype(np.float32), k_cache.astype(cache), v_cache.astype(cache)
    kw = {k: v for k, v in opts.items() if k not in ("alibi", "sinks")}
    if "alibi" in opts:
        kw["alibi_slopes"] = (2.0 ** -np.linspace(1, 8, hq)).astype(np.float32)  # ALiBi's geometric slopes
    if "sinks" in opts:
        kw["sinks"] = (rs.standard_normal(hq) * 2).astype(np.float32)
    return (q, k_cache, v_cache, table, seq_lens), kw, ns


def judge(runtime, name, source=None, kernel=None):
    """Rows {output, max_abs_err, allowance, naive_err} of one grid case: the float64 reference on
    the very inputs the kernel gets (a float16 cache as it is), the allowance from the naive
    float32 run's error (the kernels compute in f32 whatever the cache holds)."""
    args, kw, ns = _inputs(name)
    plan = decode_plan.plan(*args, num_splits=ns, source=source, kernel=kernel, **kw)
    got = runtime.run(plan).outputs
    ref = reference.decode_attention(*args, **kw)
    naive = reference.decode_attention(*args, dtype=np.float32, **kw)
    rows = []
    for out, r, n in zip(("out", "lse"), ref, naive):
        naive_err = tolerance.max_abs_err(n, r)
        rows.append(
            {
                "output": out,
                "max_abs_err": tolerance.max_abs_err(got[out], r),
                "allowance": tolerance.allowance(naive_err, r),
                "naive_err": naive_err,
            }
        )
    return rows, plan


def _ratio(rows):
    return max(r["max_abs_err"] / r["allowance"] for r in rows)


def _needs_f16(runtime, name):
    if GRID[name][7] and "shader-f16" not in runtime.features:
        pytest.skip(f"decode.split_f16 needs shader-f16, which {runtime.name} lacks")


@pytest.mark.parametrize("name", list(GRID))
def test_kernel_matches_reference(native_runtime, name):
    _needs_f16(native_runtime, name)
    rows, plan = judge(native_runtime, name)
    bad = [
        f"{r['output']}: max abs err {r['max_abs_err']:.3e} > allowance {r['allowance']:.3e} (naive {r['naive_err']:.3e})"
        for r in rows
        if not r["max_abs_err"] <= r["allowance"]
    ]
    assert not bad, "; ".join(bad)
    assert all(r["naive_err"] < 1e-4 for r in rows)  # a float32 yardstick, not a float16 one


def test_grid_is_awkward():
    lens = [n for spec in GRID.values() for n in spec[0]]
    assert 0 in lens and max(lens) >= 16384
    assert {16, 64} <= {spec[5] for spec in GRID.values()}
    assert any(n % spec[5] for spec in GRID.values() for n in spec[0])  # ends mid-block
    ratios = {spec[2] // spec[3] for spec in GRID.values()}
    assert {8, 32} <= ratios  # GQA 8:1 and MQA
    assert {1, 5} <= {spec[1] for spec in GRID.values()}
    opts = [spec[6] for spec in GRID.values()]
    for key in ("sinks", "alibi", "window_left", "softcap"):
        assert any(key in o for o in opts) and any(key not in o for o in opts)
    assert {True, False} == {spec[7] for spec in GRID.values()}


def test_the_grid_exercises_splits_row_blocks_and_the_scalar_path():
    """The grid reaches what the kernel does differently: several splits (some empty), several
    row blocks per kv head, head dims not a multiple of 4 (scalar loads), several tiles a split."""
    plans = {}
    for name in GRID:
        args, kw, ns = _inputs(name)
        plans[name] = decode_plan.plan(*args, num_splits=ns, **kw)
    assert any(p.meta["num_splits"] > 1 for p in plans.values())
    assert any(p.meta["tiles"].row_blocks > 1 for p in plans.values())
    assert any("var<storage, read> q: array<f32>;" in p.dispatches[0].source for p in plans.values())
    # more splits than tiles: some splits read nothing and must still write an empty state
    p = plans["more-splits-than-tiles"]
    assert p.meta["num_splits"] * p.meta["tiles"].BC > max(GRID["more-splits-than-tiles"][0])
    # a split of many tiles
    p = plans["one-split-2000-keys"]
    assert p.meta["num_splits"] == 1 and 2000 // p.meta["tiles"].BC > 10


def test_idle_slots_give_zero_and_minus_inf_or_the_sink(native_runtime):
    args, kw, ns = _inputs("gqa8-one-new-bs16-mid-block-idle")
    got = native_runtime.run(decode_plan.plan(*args, num_splits=3)).outputs
    assert np.all(got["out"][1] == 0.0) and np.all(np.isneginf(got["lse"][1]))
    assert np.all(np.isfinite(got["lse"][[0, 2, 3]]))
    sinks = np.linspace(-2, 2, 16).astype(np.float32)
    got = native_runtime.run(decode_plan.plan(*args, sinks=sinks, num_splits=3)).outputs
    assert np.all(got["out"][1] == 0.0) and np.array_equal(got["lse"][1, 0], sinks)


def test_a_sample_passes_with_runtime_checks_too(native_runtime):
    """The grid runs trusted (no bounds checks, the default); the kernels pass checked as well."""
    saved = native_runtime.trusted
    native_runtime.trusted = False
    try:
        for name in ("mqa32-five-new-row-blocks-alibi", "mqa-window-softcap-d59"):
            assert _ratio(judge(native_runtime, name)[0]) <= 1.0, name
    finally:
        native_runtime.trusted = saved


def test_an_out_of_range_block_reads_as_zeros(native_runtime):
    """A block-table entry out of range is refused before any plan exists; the kernel guards it all
    the same. A plan whose table bytes are changed afterwards (the check bypassed) runs trusted and
    reads that block as zeros: the same as pointing the entry at an all-zero block."""
    args, kw, _ = _inputs("gqa8-one-new-bs16-mid-block-idle")
    q, k_cache, v_cache, table, lens = args
    bad = table.copy()
    bad[2, 3] = 10**6  # sequence 2's fourth block (100 tokens, blocks 0..6)
    with pytest.raises(ValueError, match=r"block_table\[2, 3\] = 1000000 is out of range"):
        decode_plan.plan(q, k_cache, v_cache, bad, lens)
    plan = decode_plan.plan(*args, num_splits=2)
    (buf,) = [b for b in plan.buffers if b.name == "block_table"]
    buf.data = bad.tobytes()
    got = native_runtime.run(plan).outputs
    zero = k_cache.shape[0]
    k0, v0 = (np.concatenate([c, np.zeros_like(c[:1])]) for c in (k_cache, v_cache))
    moved = table.copy()
    moved[2, 3] = zero
    want_out, want_lse = reference.decode_attention(q, k0, v0, moved, lens)
    assert tolerance.max_abs_err(got["out"], want_out) < 1e-5 and tolerance.max_abs_err(got["lse"], want_lse) < 1e-5


# Bugs a decode kernel could have, each with the grid case that carries what it breaks; the case
# must fail by WIDE times its allowance or more (each fails by 10^5x or more on lavapipe, or gives
# an infinite error). One case a bug: every planted source is compiled with runtime checks, slowly.
PLANTED = {
    "the running sum misses alpha": (
        "l_row[r] = l_row[r] * alpha + sum;",
        "l_row[r] = l_row[r] + sum;",
        "gqa8-five-new-bs64-sinks",
    ),
    "the window starts one key late": (
        "row_lo[m] = pos - min(pos, u32(wl));",
        "row_lo[m] = pos - min(pos, u32(wl)) + 1u;",
        "mqa-window-softcap-d59",
    ),
    "a new token sees the next one": ("row_hi[m] = pos + 1u;", "row_hi[m] = pos + 2u;", "more-splits-than-tiles"),
    "ALiBi with the wrong sign": (
        "x += row_slope[m] * f32(i32(j) - row_pos[m]);",
        "x += row_slope[m] * f32(row_pos[m] - i32(j));",
        "more-splits-than-tiles",
    ),
    "the slot inside a block off by one": (
        "(u32(blk) * BS + j % BS)",
        "(u32(blk) * BS + (j + 1u) % BS)",
        "more-splits-than-tiles",
    ),
    "the last tile dropped": (
        "for (var t0 = start; t0 < end; t0 += BC) {",
        "for (var t0 = start; t0 + BC < end; t0 += BC) {",
        "more-splits-than-tiles",
    ),
    "the sink left out": ("    z += exp_le0(sink - top);\n", "\n", "gqa8-five-new-bs64-sinks"),
    "the combine drops the last split": (
        "z += select(0.0, ml.y * exp_le0(ml.x - top), ml.x > LOWEST);",
        "z += select(0.0, ml.y * exp_le0(ml.x - top), ml.x > LOWEST && s + 1u < ns);",
        "mqa32-five-new-row-blocks-alibi",
    ),
    "the combine adds the splits' o unweighted": (
        "acc += exp_le0(ml.x - top) * part_o[(gr * ns + s) * D4 + col];",
        "acc += part_o[(gr * ns + s) * D4 + col];",
        "mqa32-five-new-row-blocks-alibi",
    ),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_are_caught(native_runtime, bug):
    old, new, name = PLANTED[bug]
    source = decode_plan.kernel_source("decode.split", _inputs(name)[0][0].shape[3])
    assert source.count(old) == 1, f"planted bug {bug!r} no longer matches the kernel"
    ratio = _ratio(judge(native_runtime, name, source=source.replace(old, new))[0])
    assert ratio >= WIDE, f"{name} fails the planted bug by {ratio:.3g}x its allowance, not {WIDE}x: {bug}"


# ---------------------------------------------------------------------------
# tiles, splits and what the plan refuses (no adapter needed)
# ---------------------------------------------------------------------------

LIMITS = [
    dict(DEFAULT_LIMITS),
    {"max_wg_storage": 32768, "max_invocations": 1024, "cpu": 1},
    {"max_wg_storage": 49152, "max_invocations": 1024, "cpu": 0},
]


@pytest.mark.parametrize("f16", [False, True])
@pytest.mark.parametrize("dim", [1, 59, 64, 80, 128, 256])
@pytest.mark.parametrize("rows", [1, 4, 40, 160, 1024])
@pytest.mark.parametrize("limits", LIMITS, ids=lambda lim: f"{lim['max_wg_storage']}{'-cpu' if lim['cpu'] else ''}")
def test_tiles_fit_the_adapter_and_the_private_arrays(f16, dim, rows, limits):
    t = decode_plan.tiles(dim, rows, f16, limits)
    knobs = t.constants()
    src = decode_plan.kernel_source("decode.split_f16" if f16 else "decode.split", dim)
    assert workgroup_storage(src, knobs, "decode_split") == t.storage(f16) <= limits["max_wg_storage"]
    assert t.WG <= limits["max_invocations"] and t.WG % t.BC == 0 and t.WG % t.NC == 0
    caps = {name: int(v) for name, v in re.findall(r"const\s+MAX_(\w+)\s*:\s*u32\s*=\s*(\d+)u;", src)}
    assert t.SPT <= caps["SPT"] and t.RPT <= caps["RPT"] and t.CPT <= caps["CPT"] and t.PF <= caps["PF"]
    assert t.RPT * t.CPT <= caps["RPT"]  # the o accumulator stays in registers
    # every row, key, column and vec4 of a tile has an invocation
    assert t.SPT * t.SRG >= t.RB and t.RPT * t.NRG >= t.RB and t.NC * t.CPT >= t.D4 and t.PF * t.WG >= t.BC * t.D4
    assert t.RB * t.row_blocks >= rows and t.KS >= t.NC * t.CPT and t.KS % 2 == 1 and t.QS % 2 == 1


def test_a_kv_group_is_read_once_where_it_fits():
    """The target (Hq 32, Hkv 8, 1 new token: 4 rows) and GQA 8:1 with 5 new tokens (40 rows) keep
    every row of a kv head in one workgroup, so the cache is read once; MQA with 32 heads and 5 new
    tokens (160 rows) needs row blocks."""
    h100 = {"max_wg_storage": 49152, "max_invocations": 1024, "cpu": 0}
    target = decode_plan.tiles(128, 4, True, h100)
    assert (target.row_blocks, target.WG, target.BC) == (1, 128, 32)
    assert decode_plan.tiles(128, 40, True, h100).row_blocks == 1
    assert decode_plan.tiles(64, 160, False, h100).row_blocks > 1


def test_split_count_rule():
    gpu = {"max_wg_storage": 49152, "max_invocations": 1024, "cpu": 0}
    cpu = {"max_wg_storage": 32768, "max_invocations": 1024, "cpu": 1}
    # the target: B 8 x Hkv 8 = 64 work items, 32k keys: 1024 / 64 = 16 splits of 2048 keys
    assert decode_plan.split_count(32768, 64, gpu) == 16
    # short caches keep >= MIN_SPLIT_KEYS keys a split; big batches need no split
    assert decode_plan.split_count(700, 64, gpu) == 2
    assert decode_plan.split_count(100, 1, gpu) == 1
    assert decode_plan.split_count(32768, 4096, gpu) == 1
    assert decode_plan.split_count(10**6, 1, gpu) == decode_plan.MAX_SPLITS
    assert decode_plan.split_count(16421, 2, cpu) == 16


def test_params_struct_matches_the_wgsl():
    src = decode_plan.kernel_source("decode.split", 64)
    body = re.sub(r"//[^\n]*", "", re.search(r"struct\s+Params\s*\{(.*?)\}", src, re.S).group(1))
    assert re.findall(r"(\w+)\s*:\s*(\w+)\s*,?", body) == list(decode_plan.PARAMS)
    assert len(decode_plan.PARAMS) * 4 % 16 == 0


def test_bindings_match_the_wgsl():
    for kernel, dim in (("decode.split", 64), ("decode.split_f16", 59)):
        src = decode_plan.kernel_source(kernel, dim)
        found = dict(re.findall(r"@binding\((\d+)\)\s*var<[^>]*>\s*(\w+)\s*:", src))
        assert {int(i): name for i, name in found.items()} == {i: name for i, (name, _) in decode_plan.BINDINGS.items()}
        # the split pass binds 8 storage buffers: WebGPU's default limit per stage
        assert sum(decode_plan.BINDINGS[i][1] != "uniform" for i in decode_plan.SPLIT_USES) <= 8


def test_plan_refuses_what_the_kernels_cannot_take():
    args, _, _ = _inputs("gqa8-five-new-bs64-sinks")
    q, k_cache, v_cache, table, lens = args
    with pytest.raises(ValueError, match=r"seq_lens\[1\] must be 0 \(an idle slot\) or in \[Sq_new"):
        decode_plan.plan(q, k_cache, v_cache, table, [130, 3, 0, 64])
    big = np.zeros((1, 1, 2, 260), np.float32)
    with pytest.raises(ValueError, match=r"decode.split supports head_dim <= 256, got 260"):
        decode_plan.plan(big, np.zeros((1, 4, 1, 260), np.float32), np.zeros((1, 4, 1, 260), np.float32), [[0]], [1])
    with pytest.raises(ValueError, match=r"num_splits must be None or an integer in \[1, 256\]"):
        decode_plan.plan(*args, num_splits=0)
    with pytest.raises(ValueError, match=r"num_splits must be None or an integer"):
        decode_plan.plan(*args, num_splits=2.0)
    with pytest.raises(ValueError, match=r"kernel must be one of"):
        decode_plan.plan(*args, kernel="decode.fast")


def test_f16_kernel_is_chosen_for_a_float16_cache_and_asks_for_shader_f16():
    args, kw, _ = _inputs("f16-gqa8-one-new-bs16-d59")
    p = decode_plan.plan(*args, **kw)
    assert p.meta["kernel"] == "decode.split_f16" and all(d.requires == ("shader-f16",) for d in p.dispatches)
    (k,) = [b for b in p.buffers if b.name == "k_cache"]
    assert len(k.data) == args[1].nbytes  # uploaded as it is, two bytes an element
    assert "enable f16;" in p.dispatches[0].source


def test_bytes_touched_counts_each_visible_key_once():
    # 2 sequences, the second windowed: keys (100) + (5 new + 16 before) per kv head
    assert decode_plan.bytes_touched([100, 0], -1, 1, 8, 128, 2) == 2 * 100 * 8 * 128 * 2
    assert decode_plan.bytes_touched([300], 15, 5, 2, 64, 4) == 2 * (5 + 15) * 2 * 64 * 4
