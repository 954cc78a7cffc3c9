"""The decode kernels (shaders/paged_decode.split.wgsl) run natively (wgpu-py; lavapipe here) on the
`decode` interface's conformance grid (wgattn.interfaces.paged_decode), judged against
wgattn.reference.decode_attention by the tolerance rule: planted bugs caught by a wide margin, the
kernel's own guards, the tile and split rules, and what the interface refuses."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helpers import WIDE, failures, needs_features, ratio
from wgattn import conformance, live, native, reference, registry, tolerance, wgsl
from wgattn.expr import evaluate
from wgattn.interfaces.paged_decode import INTERFACE as decode
from wgattn.interfaces.paged_decode import MAX_SPLITS, bytes_touched, split_count, tiles
from wgattn.target import WEBGPU_LIMITS, Target

REG = registry.load()
KERNELS = REG.kernels_of("paged_decode")
SPLIT = REG.kernel("paged_decode.split")
CASES = {c.name: c for c in decode.conformance_cases()}


def _plan(runtime, name, kernel=SPLIT, **options):
    case = CASES[name]
    case = replace(case, options={**case.options, **options})
    return decode.plan(kernel, case, runtime.target), case


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference(native_runtime, kernel, name):
    needs_features(native_runtime, kernel)
    rows = conformance.run_case(native_runtime, kernel, CASES[name])
    assert [r["output"] for r in rows] == list(decode.OUTPUTS)
    assert all(r["naive_err"] < 1e-4 for r in rows)  # a float32 yardstick for both: f32 arithmetic
    bad = failures(rows)
    assert not bad, "; ".join(bad)


def test_grid_is_awkward():
    cases = list(CASES.values())
    lens = [int(n) for c in cases for n in c.inputs["seq_lens"]]
    assert 0 in lens and max(lens) >= 16384
    sizes = {c.inputs["k_cache"].shape[1] for c in cases}
    assert {1, 16, 64} <= sizes
    assert any(int(n) % c.inputs["k_cache"].shape[1] for c in cases for n in c.inputs["seq_lens"])  # ends mid-block
    assert {8, 32} <= {c.inputs["q"].shape[2] // c.inputs["k_cache"].shape[2] for c in cases}  # GQA 8:1 and MQA
    assert {1, 5} <= {c.inputs["q"].shape[1] for c in cases}
    for key in ("sinks", "alibi_slopes"):
        assert any(key in c.inputs for c in cases) and any(key not in c.inputs for c in cases)
    assert any(c.options["window_left"] >= 0 for c in cases) and any(c.options["softcap"] > 0 for c in cases)


def test_the_grid_exercises_splits_row_blocks_and_the_scalar_path(native_runtime):
    """The grid reaches what the kernel does differently: several splits (some empty), several
    row blocks per kv head, head dims not a multiple of 4 (scalar loads), several tiles a split."""
    lays = {n: decode.layout_on(SPLIT, c, native_runtime.target) for n, c in CASES.items()}
    assert any(lay.values["num_splits"] > 1 for lay in lays.values())
    assert any(lay.values["row_blocks"] > 1 for lay in lays.values())
    assert any(c.inputs["q"].shape[3] % 4 for c in CASES.values())
    more = lays["more-splits-than-tiles"]  # some splits read nothing and must still write an empty state
    assert more.values["num_splits"] * more.knobs["BC"] > max(CASES["more-splits-than-tiles"].inputs["seq_lens"])
    one = lays["one-split-2000-keys"]  # a split of many tiles
    assert one.values["num_splits"] == 1 and 2000 // one.knobs["BC"] > 10


def test_idle_slots_give_zero_and_minus_inf_or_the_sink(native_runtime):
    plan, _ = _plan(native_runtime, "gqa8-one-new-bs16-mid-block-idle", num_splits=3)
    got = native_runtime.run(plan).outputs
    assert np.all(got["out"][1] == 0.0) and np.all(np.isneginf(got["lse"][1]))
    assert np.all(np.isfinite(got["lse"][[0, 2, 3]]))
    case = CASES["gqa8-one-new-bs16-mid-block-idle"]
    sinks = np.linspace(-2, 2, 16).astype(np.float32)
    with_sinks = decode.case_from_reference(
        *(case.inputs[n] for n in ("q", "k_cache", "v_cache", "block_table", "seq_lens")), sinks=sinks, num_splits=3
    )
    got = native_runtime.run(decode.plan(SPLIT, with_sinks, native_runtime.target)).outputs
    assert np.all(got["out"][1] == 0.0) and np.array_equal(got["lse"][1, 0], sinks)


def test_an_out_of_range_block_reads_as_zeros(native_runtime):
    """A block-table entry out of range is refused before any plan exists; the kernel guards it all
    the same. A plan whose table bytes are changed afterwards (the check bypassed) runs trusted and
    reads that block as zeros: the same as pointing the entry at an all-zero block."""
    case = CASES["gqa8-one-new-bs16-mid-block-idle"]
    q, k_cache, v_cache, table, lens = (case.inputs[n] for n in ("q", "k_cache", "v_cache", "block_table", "seq_lens"))
    bad = table.copy()
    bad[2, 3] = 10**6  # sequence 2's fourth block (100 tokens, blocks 0..6)
    with pytest.raises(ValueError, match=r"block_table\[2, 3\] = 1000000 is out of range"):
        decode.case_from_reference(q, k_cache, v_cache, bad, lens)
    plan, _ = _plan(native_runtime, "gqa8-one-new-bs16-mid-block-idle", num_splits=2)
    (buf,) = [b for b in plan.buffers if b.name == "block_table"]
    buf.data = bad.astype(np.int32).tobytes()
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
        "      l[r] *= alpha;\n",
        "\n",
        "gqa8-five-new-bs64-sinks",
    ),
    "the window starts one key late": (
        "row_lo[r] = pos - min(pos, u32(wl));",
        "row_lo[r] = pos - min(pos, u32(wl)) + 1u;",
        "mqa-window-softcap-d59",
    ),
    "a new token sees the next one": ("row_hi[r] = pos + 1u;", "row_hi[r] = pos + 2u;", "more-splits-than-tiles"),
    "ALiBi with the wrong sign": (
        "x += row_slope[r] * f32(i32(j) - row_pos[r]);",
        "x += row_slope[r] * f32(row_pos[r] - i32(j));",
        "more-splits-than-tiles",
    ),
    "the slot inside a block off by one": (
        "(u32(blk) * BS + j % BS)",
        "(u32(blk) * BS + (j + 1u) % BS)",
        "more-splits-than-tiles",
    ),
    "the scores' keys not the ones a key group loaded": (
        "let j = t0 + (e / RB) % KPG * KG + e / RB / KPG;",
        "let j = t0 + e / RB;",
        "more-splits-than-tiles",
    ),
    "the last tile dropped": (
        "for (var t0 = start; t0 < end; t0 += BC) {",
        "for (var t0 = start; t0 + BC < end; t0 += BC) {",
        "more-splits-than-tiles",
    ),
    "the sink left out": ("    z += exp_le0(sink - top);\n", "\n", "gqa8-five-new-bs64-sinks"),
    "the combine's sums drop the last split": (
        "    if (ml.x > LOWEST) {\n      let top = max(mx, ml.x);",
        "    if (ml.x > LOWEST && s + 1u < ns) {\n      let top = max(mx, ml.x);",
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
    case = CASES[name]
    source = SPLIT.source({"head_dim": case.inputs["q"].shape[3]})
    assert source.count(old) == 1, f"planted bug {bug!r} no longer matches the kernel"
    r = ratio(conformance.run_case(native_runtime, SPLIT, case, source=source.replace(old, new)))
    assert r >= WIDE, f"{name} fails the planted bug by {r:.3g}x its allowance, not {WIDE}x: {bug}"


# ---------------------------------------------------------------------------
# tiles, splits and what the interface refuses (no adapter needed)
# ---------------------------------------------------------------------------


def _target(storage, software):
    limits = dict(WEBGPU_LIMITS)
    limits.update({"max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": 1024})
    return Target(features=("shader-f16",), limits=limits, software=software, name=f"{storage}{'-cpu' if software else ''}")


TARGETS = [_target(16384, False), _target(32768, True), _target(49152, False)]


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k.id)
@pytest.mark.parametrize("dim", [1, 59, 64, 80, 128, 256, 512])
@pytest.mark.parametrize("rows", [1, 4, 40, 160, 1024])
@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.name)
def test_tiles_fit_the_adapter_and_the_private_arrays(kernel, dim, rows, target):
    t, row_blocks = tiles(kernel, dim, rows, target)
    src = kernel.source({"head_dim": dim})
    fit = kernel.fit({"head_dim": dim}, target, source=src, chosen=t)  # the registry's checks hold
    assert fit.storage <= target.limit("max-compute-workgroup-storage-size")
    caps = {name[4:]: n for name, n in wgsl.consts(src).items() if name.startswith("MAX_")}
    assert t["WG"] % t["NL"] == 0 and t["WG"] % t["NC"] == 0 and t["KG"] * t["NL"] == t["WG"]
    assert t["KPG"] <= caps["KPG"] and t["RB"] <= caps["RB"] and t["CPT"] <= caps["CPT"]
    # every 8 columns of a key row have a lane, every key of a tile a group, every vec4 a combine lane
    assert t["NL"] >= t["DC"] and 8 * t["DC"] >= dim and t["BC"] == t["KG"] * t["KPG"] and t["NC"] * t["CPT"] >= t["D4"]
    assert t["RB"] * row_blocks >= rows and t["QS"] == 2 * t["NL"] and t["PS"] % 2 == 1 and t["PS"] >= t["NL"]
    assert t["NL"] & (t["NL"] - 1) == 0 and t["NC"] & (t["NC"] - 1) == 0  # powers of two
    # the shape is one of the manifest's candidates for this kind of adapter, its constraints hold
    # (the next tile's K and V in flight within the registers allowed an invocation among them)
    kind = "cpu" if target.software else "gpu"
    assert {"adapter": kind, "WG": t["WG"], "KPG": t["KPG"]} in [dict(c) for c in kernel.tiles]
    assert (
        all(evaluate(c, t) == 0 for c in kernel.constraints) and 2 * t["KPG"] * (16 if kernel.precision == "f16" else 32) <= 256
    )


def test_a_kv_group_is_read_once_where_it_fits():
    """The target (Hq 32, Hkv 8, 1 new token: 4 rows) keeps every row of a kv head in one
    workgroup, so the cache is read once, with 4 keys a group in flight (32 a tile); each
    invocation holds o for every row of the block (at most MAX_RB = 4), so GQA 8:1 with 2 new
    tokens (16 rows) takes 4 row blocks, with 5 new tokens (40 rows) 10 (their re-reads close
    together in time), MQA with 32 heads and 5 new tokens (160 rows) 40."""
    h100 = TARGETS[2]
    f16 = REG.kernel("paged_decode.split_f16")
    t, row_blocks = tiles(f16, 128, 4, h100)
    assert (row_blocks, t["WG"], t["KPG"], t["BC"], t["NL"]) == (1, 128, 4, 32, 16)
    # an f32 chunk is 32 bytes: 4 keys' K and V are all the bytes in flight an invocation may have
    assert tiles(SPLIT, 128, 4, h100)[0]["KPG"] == 4
    cpu = TARGETS[1]  # a software adapter: smaller workgroups (SIMD lanes, barriers across all)
    assert (tiles(f16, 128, 4, cpu)[0]["WG"], tiles(f16, 128, 4, cpu)[1]) == (64, 1)
    assert tiles(f16, 128, 16, h100)[1] == 4
    assert tiles(f16, 128, 40, h100)[1] == 10
    assert tiles(SPLIT, 64, 160, h100)[1] == 40


def test_split_count_rule():
    gpu, cpu = TARGETS[2], TARGETS[1]
    # the target: B 8 x Hkv 8 = 64 work items, 32k keys: 1024 / 64 = 16 splits of 2048 keys
    assert split_count(32768, 64, gpu) == 16
    # short caches keep >= MIN_SPLIT_KEYS keys a split; big batches need no split
    assert split_count(700, 64, gpu) == 2
    assert split_count(100, 1, gpu) == 1
    assert split_count(32768, 4096, gpu) == 1
    assert split_count(10**6, 1, gpu) == MAX_SPLITS
    # one 128k-token sequence, 8 kv heads: 64 splits of 2048 keys (512 workgroups), not 128 of 1024
    assert split_count(131072, 8, gpu) == 64
    # a shorter one still fills half of the GPU's target: 32 splits of 256 keys, not 4 of 2048
    assert split_count(8192, 8, gpu) == 32
    # a software adapter's splits stay as short as MIN_SPLIT_KEYS allows
    assert split_count(131072, 8, cpu) == 4
    assert split_count(16421, 2, cpu) == 16


def test_the_split_pass_binds_at_most_webgpus_default_storage_buffers():
    split = next(p for p in decode.abi.passes if p.name == "split")
    kinds = {b.binding: b.kind for b in decode.abi.bindings}
    assert sum(kinds[i] == "storage" for i in split.uses) <= 8


def test_what_the_interface_refuses():
    case = CASES["gqa8-five-new-bs64-sinks"]
    q, k_cache, v_cache, table, lens = (case.inputs[n] for n in ("q", "k_cache", "v_cache", "block_table", "seq_lens"))
    with pytest.raises(ValueError, match=r"seq_lens\[1\] must be 0 \(an idle slot\) or in \[Sq_new"):
        decode.case_from_reference(q, k_cache, v_cache, table, [130, 3, 0, 64])
    with pytest.raises(ValueError, match=r"num_splits must be None or an integer in \[1, 256\]"):
        decode.case_from_reference(q, k_cache, v_cache, table, lens, num_splits=0)
    with pytest.raises(ValueError, match=r"num_splits must be None or an integer"):
        decode.case_from_reference(q, k_cache, v_cache, table, lens, num_splits=2.0)
    big = decode.case_from_reference(
        np.zeros((1, 1, 2, 520), np.float32),
        np.zeros((1, 4, 1, 520), np.float32),
        np.zeros((1, 4, 1, 520), np.float32),
        [[0]],
        [1],
    )
    plan = decode.plan(SPLIT, big, TARGETS[2])
    assert "paged_decode.split supports head_dim <= 512, got 520" in plan.unavailable
    # more new tokens than a decoding step has: the paged_prefill interface's
    with pytest.raises(ValueError, match=r"paged_decode takes at most 16 new tokens a sequence .* paged_prefill"):
        decode.case_from_reference(np.zeros((4, 17, 16, 128), np.float32), k_cache, v_cache, table, [130, 17, 0, 64])


def test_the_f16_kernel_uploads_a_float16_cache_and_asks_for_shader_f16():
    case = conformance.judged_case(REG.kernel("paged_decode.split_f16"), CASES["gqa8-one-new-bs16-d59-sinks"])
    p = decode.plan(REG.kernel("paged_decode.split_f16"), case, TARGETS[2])
    assert all(d.requires == ("shader-f16",) for d in p.dispatches)
    (k,) = [b for b in p.buffers if b.name == "k_cache"]
    assert len(k.data) == case.inputs["k_cache"].size * 2 and "enable f16;" in p.dispatches[0].source


def test_a_float16_cache_of_an_odd_number_of_values_is_uploaded(native_runtime):
    """WebGPU writes a buffer in 4-byte words: a float16 cache of an odd number of values (head_dim
    1, one-token blocks: 5 halves per cache) was a validation error and a discarded device, a 503 for
    a valid request (found by schemathesis). Now it runs and matches the reference."""
    kernel = REG.kernel("paged_decode.split_f16")
    needs_features(native_runtime, kernel)
    config = {"batch": 1, "heads": 1, "heads_kv": 1, "seq_len": 4, "head_dim": 1, "block_size": 1, "ragged": False}
    run = live.build(kernel.id, config)
    assert run.case.inputs["k_cache"].size % 2  # odd: the upload is padded to a whole word
    rows = conformance.run_case(native_runtime, kernel, run.case)
    bad = failures(rows)
    assert not bad, "; ".join(bad)
    (k,) = [b for b in run.plan(native_runtime.target).buffers if b.name == "k_cache"]
    assert len(k.data) == 12 and k.data[10:] == b"\0\0"


def test_the_native_api_runs_decode(native_runtime):
    case = CASES["mqa-window-softcap-d59"]
    args = [case.inputs[n] for n in ("q", "k_cache", "v_cache", "block_table", "seq_lens")]
    kw = {k: case.options[k] for k in ("scale", "window_left", "softcap")}
    out, lse = native.decode_attention(*args, **kw)
    want_out, want_lse = reference.decode_attention(*args, **kw)
    assert tolerance.max_abs_err(out, want_out) < 1e-5 and tolerance.max_abs_err(lse, want_lse) < 1e-5


def test_bytes_touched_counts_each_visible_key_once():
    # 2 sequences, the second windowed: keys (100) + (5 new + 16 before) per kv head
    assert bytes_touched([100, 0], -1, 1, 8, 128, 2) == 2 * 100 * 8 * 128 * 2
    assert bytes_touched([300], 15, 5, 2, 64, 4) == 2 * (5 + 15) * 2 * 64 * 4
