"""The prefill kernels on plain arithmetic (shaders/paged_prefill.tiled.wgsl) run natively (wgpu-py;
lavapipe here) on the `paged_prefill` interface's conformance grid (wgattn.interfaces.paged_prefill),
judged against wgattn.reference.decode_attention by the tolerance rule: planted bugs caught by a
wide margin, the tile and block size per target, what the interface refuses and says it cannot
hold, the native API's choice between decode and prefill, the benchmark's case, FLOPs, yardstick
and its check on filled inputs. The kernels on subgroup matrices (paged_prefill.smx, smx_f16) are
checked on the lavapipe bed (bench/smx_testbed: `testbed.sh check --kernel paged_prefill.smx`)
and planned here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helpers import MATRIX_TARGET, failures, needs_features, ratio
from wgattn import bandwidth, conformance, native, reference, registry, tolerance
from wgattn.interfaces import _paged
from wgattn.interfaces.paged_decode import INTERFACE as decode
from wgattn.interfaces.paged_prefill import INTERFACE as prefill
from wgattn.interfaces.paged_prefill import PrefillConfig, naive_f16
from wgattn.target import WEBGPU_LIMITS, MatrixConfig, Target

REG = registry.load()
KERNELS = REG.kernels_of("paged_prefill")
TILED = REG.kernel("paged_prefill.tiled")
NATIVE = [k for k in KERNELS if k.matrix is None]
CASES = {c.name: c for c in prefill.conformance_cases()}
INPUTS = ("q", "k_cache", "v_cache", "block_table", "seq_lens")


@pytest.mark.parametrize("kernel", NATIVE, ids=lambda k: k.id)
@pytest.mark.parametrize("name", list(CASES))
def test_kernel_matches_reference(native_runtime, kernel, name):
    needs_features(native_runtime, kernel)
    rows = conformance.run_case(native_runtime, kernel, CASES[name])
    assert [r["output"] for r in rows] == list(prefill.OUTPUTS)
    bad = failures(rows)
    assert not bad, "; ".join(bad)


def test_grid_is_awkward():
    cases = list(CASES.values())
    lens = [int(n) for c in cases for n in c.inputs["seq_lens"]]
    assert 0 in lens and max(lens) >= 65536  # idle slots, the long-context row
    assert any(int(c.inputs["q"].shape[1]) in [int(n) for n in c.inputs["seq_lens"]] for c in cases)  # a whole cache
    assert {1, 4, 7, 16, 32, 64} <= {c.inputs["k_cache"].shape[1] for c in cases}
    assert any(int(n) % c.inputs["k_cache"].shape[1] for c in cases for n in c.inputs["seq_lens"])  # ends mid-block
    assert {1, 2, 3, 4} <= {c.inputs["q"].shape[2] // c.inputs["k_cache"].shape[2] for c in cases}
    assert any(c.inputs["k_cache"].shape[2] == 1 and c.inputs["q"].shape[2] > 1 for c in cases)  # MQA
    assert {1, 59, 111, 128, 256, 512} <= {c.inputs["q"].shape[3] for c in cases}
    assert {1, 300} <= {c.inputs["q"].shape[1] for c in cases}
    for key in ("sinks", "alibi_slopes"):
        assert any(key in c.inputs for c in cases) and any(key not in c.inputs for c in cases)
    assert {0, 13} <= {c.options["window_left"] for c in cases} and any(c.options["softcap"] > 0 for c in cases)


def test_the_grid_reaches_several_tiles_and_head_dim_chunks(native_runtime):
    """Rows past a block of BR new tokens, keys past many BC-key tiles, and head dims staged in
    several chunks: what the kernel does differently there."""
    knobs = {n: prefill.layout_on(TILED, c, native_runtime.target).knobs for n, c in CASES.items()}
    assert any(CASES[n].inputs["q"].shape[1] > k["BR"] for n, k in knobs.items())
    assert any(k["NCH"] > 1 for k in knobs.values()) and any(k["NCH"] == 1 for k in knobs.values())
    assert all(k["BS"] == CASES[n].inputs["k_cache"].shape[1] for n, k in knobs.items())


# Bugs a prefill kernel could have, each with the grid case that carries what it breaks: each
# fails by PLANTED_MARGIN times its allowance or more (by 10^5x or more on lavapipe).
PLANTED_MARGIN = 100.0
PLANTED = {
    "the block-table index off by one": (
        "block_table[b * params.max_blocks + j / BS]",
        "block_table[b * params.max_blocks + j / BS + 1u]",
        "whole-cache-gqa4-bs16-idle",
    ),
    "causal aligned top-left instead of bottom-right": (
        "let row_pos = vec4<i32>(vec4<u32>(n - select(0u, sq, live) + i0) + r4);",
        "let row_pos = vec4<i32>(vec4<u32>(i0) + r4);",
        "whole-cache-gqa4-bs16-idle",
    ),
    "the sink ignored": ("      z += exp_le0(sink - top);\n", "\n", "alibi-sinks-mha-bs1-idle"),
    "ALiBi with the wrong sign": (
        "x += slope * vec4<f32>(j - row_pos);",
        "x += slope * vec4<f32>(row_pos - j);",
        "alibi-sinks-mha-bs1-idle",
    ),
    "the window starts one key late": (
        "row_lo = max(row_lo, row_pos - wl);",
        "row_lo = max(row_lo, row_pos - wl + 1);",
        "window-softcap-d111-gqa3",
    ),
    "the last head-dim chunk of V dropped": (
        "for (var ch = 0u; ch < NCH; ch++) {\n      stage_kv(true,",
        "for (var ch = 0u; ch + 1u < NCH; ch++) {\n      stage_kv(true,",
        "d512-gqa2-bs32-sinks",
    ),
}


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_planted_bugs_are_caught(native_runtime, bug):
    old, new, name = PLANTED[bug]
    case = CASES[name]
    knobs = prefill.layout_on(TILED, case, native_runtime.target).knobs
    source = TILED.source({"head_dim": case.inputs["q"].shape[3]}, native_runtime.target, knobs)
    assert source.count(old) == 1, f"planted bug {bug!r} no longer matches the kernel"
    r = ratio(conformance.run_case(native_runtime, TILED, case, source=source.replace(old, new)))
    assert r >= PLANTED_MARGIN, f"{name} fails the planted bug by {r:.3g}x its allowance, not {PLANTED_MARGIN}x: {bug}"


def test_the_native_api_runs_prefill_past_decode_s_new_tokens(native_runtime):
    """decode_attention is one op with two interfaces: a call with at most 16 new tokens a sequence
    runs a decode kernel, one with more a prefill kernel (paged_decode refuses it, saying so)."""
    case = CASES["window-in-new-tokens-d32"]  # 48 new tokens
    args = [case.inputs[n] for n in INPUTS]
    kw = {k: case.options[k] for k in ("scale", "window_left", "softcap")}
    assert "tiled" in native.implementations("decode_attention") and "split" in native.implementations("decode_attention")
    out, lse = native.decode_attention(*args, **kw)
    want_out, want_lse = reference.decode_attention(*args, **kw)
    assert tolerance.max_abs_err(out, want_out) < 1e-5 and tolerance.max_abs_err(lse, want_lse) < 1e-5
    with pytest.raises(ValueError, match="paged_decode takes at most 16 new tokens"):
        native.decode_attention(*args, impl="split", **kw)
    short = [a[:, -3:] if i == 0 else a for i, a in enumerate(args)]  # the last 3 new tokens: a decode step
    assert np.allclose(
        native.decode_attention(*short, impl="tiled", **kw)[0], native.decode_attention(*short, **kw)[0], atol=1e-5
    )


# ---------------------------------------------------------------------------
# tiles, what the interface refuses, the yardstick (no adapter needed)
# ---------------------------------------------------------------------------


def _target(storage, software=False, matrix=None):
    limits = dict(WEBGPU_LIMITS)
    limits.update({"max-compute-workgroup-storage-size": storage, "max-compute-invocations-per-workgroup": 1024})
    if matrix is None:
        return Target(features=frozenset({"shader-f16"}), limits=limits, software=software, name=f"an adapter of {storage} bytes")
    return replace(
        MATRIX_TARGET,
        limits=limits,
        software=software,
        matrix_configs=(matrix,),
        subgroup_sizes=(32, 32) if matrix.m == 16 else (8, 8),
    )


H100 = _target(49152, matrix=MatrixConfig("f16", "f32", 16, 16, 16))
# as Chromium offers the H100: buffers of a GB bind (the benchmark's caches)
H100 = replace(H100, limits={**H100.limits, "max-storage-buffer-binding-size": 2**31, "max-buffer-size": 2**31})
BED = _target(32768, True, MatrixConfig("f16", "f32", 8, 8, 8))  # the lavapipe bed


# the kernels on plain arithmetic on any adapter, those on subgroup matrices where there are some
FITS = [
    (k, t)
    for k in KERNELS
    for t in [_target(16384), _target(32768, True), _target(49152), H100, BED]
    if k.matrix is None or t.matrix("f16", "f32") is not None
]


@pytest.mark.parametrize("kernel, target", FITS, ids=[f"{k.id}-{t.name}{'-cpu' if t.software else ''}" for k, t in FITS])
@pytest.mark.parametrize("dim", [1, 59, 64, 128, 256, 512])
def test_head_dim_512_fits_every_adapter_with_webgpu_s_default_storage(kernel, target, dim):
    """Every head dim up to 512 gets a tile within WebGPU's default 16 KiB (the tiled kernels:
    head-dim chunks) or the bed's and the H100's storage (the kernels on subgroup matrices)."""
    case = prefill.case_from_reference(
        np.zeros((1, 20, 4, dim), np.float32),
        np.zeros((3, 16, 2, dim), np.float32),
        np.zeros((3, 16, 2, dim), np.float32),
        [[0, 1]],
        [30],
    )
    plan = prefill.plan(kernel, case, target)
    assert not plan.unavailable, plan.unavailable
    assert plan.dispatches[0].workgroup_storage <= target.limit("max-compute-workgroup-storage-size")


def test_what_a_too_small_adapter_is_told_with_the_numbers():
    case = prefill.case_from_reference(
        np.zeros((1, 20, 4, 512), np.float32),
        np.zeros((3, 16, 2, 512), np.float32),
        np.zeros((3, 16, 2, 512), np.float32),
        [[0, 1]],
        [30],
    )
    plan = prefill.plan(TILED, case, _target(1024))
    assert not plan.dispatches and "no tile shape fits an adapter with 1024 bytes of workgroup storage" in plan.unavailable
    assert "bytes" in plan.unavailable.split("(", 1)[1]  # each candidate's own need, in bytes
    plan = prefill.plan(
        REG.kernel("paged_prefill.smx"), case, replace(H100, limits={**H100.limits, "max-compute-workgroup-storage-size": 2048})
    )
    assert "no tile shape fits an adapter with 2048 bytes" in plan.unavailable
    big = prefill.case_from_reference(
        np.zeros((1, 2, 2, 520), np.float32),
        np.zeros((1, 4, 1, 520), np.float32),
        np.zeros((1, 4, 1, 520), np.float32),
        [[0]],
        [3],
    )
    assert "paged_prefill.tiled supports head_dim <= 512, got 520" in prefill.plan(TILED, big, H100).unavailable


def test_the_smx_kernels_take_flash_fwd_s_tile_at_the_target_shape():
    """D = 128 on the H100: flash_fwd.smx's tile (8 row blocks of 16, 32 keys, two subgroups a
    row block) with the whole head dim staged; D = 512 in head-dim chunks of 128."""
    for kernel in (REG.kernel("paged_prefill.smx"), REG.kernel("paged_prefill.smx_f16")):
        for dim, want in ((128, (8, 32, 2, 128)), (512, (4, 16, 1, 128))):
            case = prefill.case_from_reference(
                np.zeros((1, 200, 4, dim), np.float32),
                np.zeros((30, 16, 1, dim), np.float32),
                np.zeros((30, 16, 1, dim), np.float32),
                [list(range(13))],
                [200],
            )
            k = prefill.layout_on(kernel, case, H100).knobs
            assert (k["RB"], k["BC"], k["DS"], k["DCH"]) == want and k["BS"] == 16


def test_what_the_interface_refuses():
    case = CASES["whole-cache-gqa4-bs16-idle"]
    q, k_cache, v_cache, table, lens = (case.inputs[n] for n in INPUTS)
    with pytest.raises(ValueError, match=r"seq_lens\[1\] must be 0 \(an idle slot\) or in \[Sq_new"):
        prefill.case_from_reference(q, k_cache, v_cache, table, [40, 39, 0])
    with pytest.raises(ValueError, match=r"q must hold at least one new token"):
        prefill.case_from_reference(q[:, :0], k_cache, v_cache, table, lens)
    with pytest.raises(ValueError, match=r"the cache \(2 \* batch \* seq_len \* heads_kv \* head_dim = \d+\) must stay within"):
        PrefillConfig(batch=64, heads=1, heads_kv=1, new_tokens=1, seq_len=200000).tensors()
    with pytest.raises(ValueError, match=r"case too large: batch\*heads\*new_tokens\*seq_len = 134217728 scores"):
        PrefillConfig(batch=2, heads=64, heads_kv=1, head_dim=1, new_tokens=1024, seq_len=1024).tensors()


def test_the_f16_kernels_upload_a_float16_cache_and_the_yardstick_is_a_naive_f16_run():
    kernel = REG.kernel("paged_prefill.tiled_f16")
    case = conformance.judged_case(kernel, CASES["alibi-sinks-mha-bs1-idle"])
    p = prefill.plan(kernel, case, _target(32768))
    (k,) = [b for b in p.buffers if b.name == "k_cache"]
    assert len(k.data) == case.inputs["k_cache"].size * 2 and "enable f16;" in p.dispatches[0].source
    ref, naive = conformance.expected(kernel, case)
    assert naive["out"].dtype == np.float16
    err = tolerance.max_abs_err(naive["out"], ref["out"])
    assert 1e-4 < err < 1e-2  # half precision's error, not single's
    assert np.array_equal(np.isneginf(naive["lse"]), np.isneginf(ref["lse"]))


def test_the_benchmark_case_its_flops_and_its_yardstick():
    """The target: q and the cache left for the GPU (no bytes), FLOPs of the visible pairs, and
    flash_fwd.smx on the same work unpaged (its q, k, v left for the GPU too) where the adapter
    has subgroup matrices, else the next flash_fwd kernel it runs."""
    from bench.prefill import TARGET

    case = prefill.bench_case(TARGET, "target")
    assert all(bandwidth.is_device_filled(case.inputs[n]) for n in ("q", "k_cache", "v_cache"))
    pairs = 8 * (2048 * (32768 - 2048) + 2048 * 2049 // 2)
    assert prefill.bench_flops(case) == 4.0 * 128 * 32 * pairs
    plan = prefill.plan(REG.kernel("paged_prefill.smx_f16"), case, H100)
    assert not plan.unavailable and all(b.data is None for b in plan.buffers if b.name in ("q", "k_cache", "v_cache"))
    kernel, flash, why = prefill.bench_yardstick(case, H100)
    assert kernel is not None and flash is not None and kernel.id == "flash_fwd.smx" and not why
    assert flash.inputs["q"].shape == (8 * 2048, 32, 128) and flash.inputs["k"].shape == (8 * 32768, 8, 128)
    assert flash.options["causal"] and flash.options["causal_align"] == "bottom_right"
    fplan = REG.kernel("flash_fwd.smx")
    assert not prefill.plan(REG.kernel("paged_prefill.smx_f16"), case, H100).unavailable
    from wgattn import interfaces

    p = interfaces.of(fplan).plan(fplan, flash, H100)
    assert not p.unavailable and all(b.data is None for b in p.buffers if b.name in ("q", "k", "v"))
    kernel, _, _ = prefill.bench_yardstick(case, _target(49152))
    assert kernel is not None and kernel.id == "flash_fwd.blocked_f16"


def test_the_check_on_filled_inputs_judges_the_rows_it_cuts_as_the_whole_reference_does():
    """A filled case's first and last new tokens are judged on the sequence cut after the last row
    checked: the same values the whole reference gives those rows (exactly, in float64)."""
    config = PrefillConfig(
        batch=2, new_tokens=40, heads=4, heads_kv=2, seq_len=90, head_dim=8, block_size=8, sinks=True, alibi=True, ragged=False
    )
    case = prefill.bench_case(config, "small")
    a = _paged.checked(case, "paged_prefill")
    idx = np.arange(a.k_cache.size).reshape(a.k_cache.shape)
    filled = dict(case.inputs)
    filled.update(q=bandwidth.fill_values("q", np.arange(a.q.size)).reshape(a.q.shape).astype(np.float32))
    filled.update(
        k_cache=bandwidth.fill_values("k_cache", idx).astype(np.float32),
        v_cache=bandwidth.fill_values("v_cache", idx).astype(np.float32),
    )
    out, _ = reference.decode_attention(*(filled[n] for n in INPUTS), alibi_slopes=filled["alibi_slopes"], sinks=filled["sinks"])
    ok = prefill.check_filled(case, {"out": out.astype(np.float32)})
    assert ok["ok"] and ok["max_abs_err"] < 1e-6
    wrong = out.copy()
    wrong[1, 3] += 0.01  # row 3 of the second sequence: inside the first 4 checked
    assert not prefill.check_filled(case, {"out": wrong.astype(np.float32)})["ok"]
    wrong = out.copy()
    wrong[0, 20] += 0.01  # a middle row: not checked
    assert prefill.check_filled(case, {"out": wrong.astype(np.float32)})["ok"]


def test_naive_f16_matches_the_reference_to_half_precision():
    case = CASES["everything-d128-many-tiles"]
    args = [case.inputs[n] for n in INPUTS]
    kw = dict(scale=case.options["scale"], window_left=case.options["window_left"], softcap=case.options["softcap"])
    kw.update(alibi_slopes=case.inputs["alibi_slopes"], sinks=case.inputs["sinks"])
    out16, lse16 = naive_f16(*args, **kw)
    out, lse = reference.decode_attention(*args, **kw)
    assert out16.dtype == np.float16 and tolerance.max_abs_err(out16, out) < 2e-2 and tolerance.max_abs_err(lse16, lse) < 5e-2


def test_the_decode_interface_still_takes_what_a_decoding_step_has():
    case = decode.conformance_cases()[0]
    assert prefill.case_from_reference(*(case.inputs[n] for n in INPUTS)).inputs["q"].shape[1] == 1


# ---------------------------------------------------------------------------
# the page's benchmark jobs, the native runtime standing in for the browser
# ---------------------------------------------------------------------------

SMALL = {"batch": 2, "new_tokens": 21, "heads": 4, "heads_kv": 2, "seq_len": 45, "head_dim": 12, "block_size": 8}


def _read_back(runtime, plan, name: str) -> bytes:
    """`plan` run: buffer `name`'s bytes."""
    from wgattn.plan import Output

    buffers = list(plan.buffers)
    i = next(i for i, b in enumerate(buffers) if b.name == name)
    buffers[i] = replace(buffers[i], read=True)
    return (
        runtime.run(replace(plan, buffers=buffers, outputs=[Output(name, name, 0, (buffers[i].size,), "uint8")]))
        .outputs[name]
        .tobytes()
    )


def test_the_page_checks_the_kernel_then_records_it_beside_its_yardstick(native_runtime):
    """A prefill request: one series, the kernel (q and the cache filled on the GPU, its output
    checked) and flash_fwd on the same work (unchecked), FLOP/s records of the same count, the
    kernel's share of the yardstick once both are in."""
    import json

    from wgattn.page import bench_jobs

    config = dict(SMALL, window_left=20, softcap=5.0)
    request = {"op": "prefill", "name": "small", "impls": "paged_prefill.tiled", "config": config, "rounds": 5}
    # ALiBi and sinks go to the yardstick too: flash_fwd takes the same work with them.
    config_heads = dict(config, sinks=True, alibi=True)
    _, other = bench_jobs.start(json.dumps(dict(request, config=config_heads)), native_runtime.target, 1)
    assert [j["impl"] for j in other["jobs"]] == ["paged_prefill.tiled", "flash_fwd.blocked_f16"], other["skipped"]
    job, reply = bench_jobs.start(json.dumps(dict(request, user_agent="HeadlessChrome/156.0.0.0")), native_runtime.target, 1)
    impls = [reply["jobs"][i]["impl"] for s in reply["series"] for i in s["jobs"]]
    assert impls == ["paged_prefill.tiled", "flash_fwd.blocked_f16"] and len(reply["series"]) == 1
    assert reply["jobs"][0]["flops"] == reply["jobs"][1]["flops"] > 0 and reply["jobs"][1]["check"] == ""
    measured = {"samples": [2.0, 1.0, 1.0, 1.0, 1.0], "reps": 1, "warmup_s": 0.1, "warmed": True, "timer": "wall", "adapter": "a"}
    records = []
    for it in reply["jobs"]:
        (plan,) = bench_jobs.job_plans(job, it["index"], native_runtime.target)
        if not it["check"]:  # the yardstick: timed on zeros, unchecked
            assert bench_jobs.fills(job, it["index"]) == [] and plan.dispatches[0].label.startswith("flash_fwd.")
            records.append(bench_jobs.record(job, it["index"], json.dumps(dict(measured, samples=[2.0] * 5)))[0])
            continue
        fills = bench_jobs.fills(job, it["index"])
        assert [f.buffers[0].name for f in fills] == ["q", "k_cache", "v_cache"]
        buffers = list(plan.buffers)
        for f in fills:
            name = f.buffers[0].name
            i = next(i for i, b in enumerate(buffers) if b.name == name)
            buffers[i] = replace(buffers[i], data=_read_back(native_runtime, f, name))
        raw = _read_back(native_runtime, replace(plan, buffers=buffers), it["check"])
        verdict = bench_jobs.check(job, it["index"], raw)
        assert verdict["ok"] and 0 < verdict["max_abs_err"] <= verdict["allowed"], verdict
        records.append(bench_jobs.record(job, it["index"], json.dumps(measured))[0])
    bandwidth.yardstick_shares(records)
    kernel, yard = records
    assert kernel["kind"] == yard["kind"] == "prefill" and not kernel["yardstick"] and yard["yardstick"]
    assert kernel["verified"]["ok"] and yard["verified"] is None and kernel["shape"] == PrefillConfig(**config).to_dict()
    assert kernel["tflops"] == 2 * yard["tflops"] and kernel["pct_of_yardstick"] == 200.0  # 1 ms against 2 ms
    assert "BS=8" in kernel["config"]
