"""Decode timed as bandwidth: one case, a DecodeConfig, timed the same way by bench/decode_bandwidth.py
(natively, on whatever adapter is here: shrunk cases, --smoke) and by the page's benchmark jobs
(wgattn.page.bench_jobs, driven here as the page drives them, with the native runtime standing in
for the browser's WebGPU): the GPU fills the cache (shaders/hash_fill.wgsl, bit for bit what
wgattn.bandwidth.fill_values says), each kernel's output is checked against the float64 reference
before it is timed, and the copy (shaders/stream.wgsl) moves exactly its bytes."""

import json
from dataclasses import replace

import numpy as np
import pytest

from bench import decode_bandwidth
from wgattn import bandwidth, registry
from wgattn.interfaces.paged_decode import INTERFACE as decode
from wgattn.interfaces.paged_decode import DecodeConfig, bytes_touched
from wgattn.page import bench_jobs
from wgattn.plan import Output
from wgattn.target import DEFAULT

REG = registry.load()
SMALL = {"batch": 3, "heads": 4, "heads_kv": 2, "seq_len": 45, "head_dim": 12, "block_size": 8, "new_tokens": 2}


def _read_back(runtime, plan, name: str, src: bytes = b"") -> bytes:
    """`plan` run (with `src` in its first buffer): buffer `name`'s bytes (the plan is left as it was)."""
    buffers = list(plan.buffers)
    if src:
        buffers[0] = replace(buffers[0], data=src)
    i = next(i for i, b in enumerate(buffers) if b.name == name)
    buffers[i] = replace(buffers[i], read=True)
    outputs = [Output(name, name, 0, (buffers[i].size,), "uint8")]
    return runtime.run(replace(plan, buffers=buffers, outputs=outputs)).outputs[name].tobytes()


def test_cases_start_with_the_target_and_count_their_bytes():
    kernel, target = decode_bandwidth.cases()["target"]
    assert kernel == "paged_decode.split_f16" and isinstance(target, DecodeConfig)
    assert (target.batch, target.heads, target.heads_kv, target.head_dim, target.seq_len) == (8, 32, 8, 128, 32768)
    assert (target.new_tokens, target.ragged) == (1, False)
    case = decode.bench_case(target, "target")  # the cache holds no bytes: 1 GB left for the GPU
    assert bandwidth.is_device_filled(case.inputs["k_cache"]) and case.inputs["k_cache"].nbytes > 2**30
    assert decode.bench_bytes(REG.kernel(kernel), case) == 2 * 8 * 32768 * 8 * 128 * 2  # K and V, once each
    assert decode.bench_bytes(REG.kernel("paged_decode.split"), case) == 2 * 8 * 32768 * 8 * 128 * 4
    x = decode_bandwidth.inputs(kernel, DecodeConfig(batch=2, heads=4, heads_kv=2, head_dim=8, seq_len=37, ragged=False))
    assert x["k_cache"].dtype.name == "float16" and x["block_table"].shape == (2, 4)
    used = x["block_table"][x["block_table"] >= 0]
    assert len(set(used.tolist())) == 6 and sorted(used.tolist()) != used.tolist()  # every block once, shuffled
    want = bandwidth.fill_values("v_cache", np.arange(x["v_cache"].size)).reshape(x["v_cache"].shape)
    np.testing.assert_array_equal(x["v_cache"], want)  # the values the page's GPU fill writes


def test_a_decode_case_has_one_set_of_bounds():
    """The page's decode benchmark takes a DecodeConfig as a live check does: its fields, its
    bounds and its messages; only the host's memory cap is the live check's alone."""
    request = {"op": "decode", "impls": "paged_decode.split", "rounds": 5}
    for config, message in [
        (dict(SMALL, new_tokens=17), "new_tokens must be an integer in 1..16"),
        (dict(SMALL, heads_q=4), r"unknown config field\(s\) \['heads_q'\] for paged_decode"),
        (dict(SMALL, heads_kv=3), r"heads \(4\) must be a multiple of heads_kv \(3\)"),
        (dict(SMALL, seq_len=1), r"seq_len \(1\) must hold the 2 new tokens"),
    ]:
        with pytest.raises(ValueError, match=message):
            bench_jobs.start(json.dumps(dict(request, config=config)), DEFAULT, 1)
    big = DecodeConfig(batch=8, heads=32, heads_kv=8, head_dim=128, seq_len=1 << 20, ragged=False)
    with pytest.raises(ValueError, match=r"the cache \(2 \* batch \* seq_len"):
        big.tensors()  # a live check draws its cache on the host
    job, reply = bench_jobs.start(json.dumps(dict(request, config=big.to_dict())), DEFAULT, 1)
    assert [j["impl"] for j in reply["jobs"]] == ["paged_decode.split", bandwidth.COPY]  # the benchmark's is filled on the GPU


def test_the_fill_writes_what_fill_values_says(native_runtime):
    case = decode.bench_case(DecodeConfig(**SMALL), "small")
    for kernel in REG.kernels_of("paged_decode"):
        if native_runtime.target.lacks(kernel):
            continue
        plan = decode.plan(kernel, case, native_runtime.target)
        fills = bandwidth.fill_plans(plan, case.inputs)
        assert [f.buffers[0].name for f in fills] == ["k_cache", "v_cache"]
        for f in fills:
            name = f.buffers[0].name
            dtype = np.float16 if kernel.precision == "f16" else np.float32
            got = np.frombuffer(_read_back(native_runtime, f, name), dtype=dtype)[: case.inputs[name].size]
            np.testing.assert_array_equal(got, bandwidth.fill_values(name, np.arange(got.size)).astype(dtype))


def _page_run(runtime, job, index, plan) -> bytes:
    """What the page does with a job to check: its inputs filled, one run, its check buffer."""
    buffers = list(plan.buffers)
    for f in bench_jobs.fills(job, index):
        name = f.buffers[0].name
        filled = _read_back(runtime, f, name)
        i = next(i for i, b in enumerate(buffers) if b.name == name)
        buffers[i] = replace(buffers[i], data=filled)
    return _read_back(runtime, replace(plan, buffers=buffers), job.items[index]["check"])


def test_the_page_checks_then_records_each_kernel_and_the_copy(native_runtime):
    config = dict(SMALL, sinks=True, alibi=True, window_left=20, softcap=5.0)  # every knob the case has
    request = {"op": "decode", "name": "small", "config": config, "rounds": 5, "user_agent": "HeadlessChrome/156.0.0.0"}
    job, reply = bench_jobs.start(json.dumps(request), native_runtime.target, 1)
    kernels = [k.id for k in REG.kernels_of("paged_decode") if not native_runtime.target.lacks(k)]
    by_series = [[reply["jobs"][i]["impl"] for i in s["jobs"]] for s in reply["series"]]
    assert [i for s in by_series for i in s if i != bandwidth.COPY] == kernels and all(s[-1] == bandwidth.COPY for s in by_series)
    measured = {"samples": [1.0] * 5, "reps": 1, "warmup_s": 0.1, "warmed": True, "timer": "wall", "adapter": "a"}
    for it in reply["jobs"]:
        (plan,) = bench_jobs.job_plans(job, it["index"], native_runtime.target)
        if not it["check"]:
            assert bench_jobs.fills(job, it["index"]) == []
            rec, _ = bench_jobs.record(job, it["index"], json.dumps(measured))
            assert rec["kind"] == "copy" and rec["verified"] is None and rec["bytes"] == 2 * job.nbytes[it["index"]]
            continue
        with pytest.raises(ValueError, match="not checked against the reference"):
            bench_jobs.record(job, it["index"], json.dumps(measured))
        verdict = bench_jobs.check(job, it["index"], _page_run(native_runtime, job, it["index"], plan))
        assert verdict["ok"] and 0 < verdict["max_abs_err"] <= verdict["allowed"], verdict
        assert len(verdict["pairs"]) == 3 * 2  # a small case: every (sequence, kv head)
        rec, last = bench_jobs.record(job, it["index"], json.dumps(measured))
        assert last and rec["kind"] == "decode" and rec["verified"] == verdict and rec["rule"]
        assert rec["shape"] == DecodeConfig(**config).to_dict() and rec["case"] == "small" and rec["runtime"] == "chromium"
        assert rec["splits"] >= 1 and f"num_splits={rec['splits']}" in rec["config"] and rec["dtype"] in ("f16", "f32")


def test_a_wrong_output_is_not_recorded(native_runtime):
    request = {"op": "decode", "impls": "paged_decode.split", "config": SMALL, "rounds": 5}
    job, reply = bench_jobs.start(json.dumps(request), native_runtime.target, 1)
    (plan,) = bench_jobs.job_plans(job, 0, native_runtime.target)
    raw = bytearray(_page_run(native_runtime, job, 0, plan))
    raw[:4] = np.float32(1e3).tobytes()  # one element of out, wrong
    verdict = bench_jobs.check(job, 0, bytes(raw))
    assert not verdict["ok"] and verdict["max_abs_err"] > 100
    with pytest.raises(ValueError, match="not checked against the reference"):
        bench_jobs.record(job, 0, json.dumps({"samples": [1.0] * 5, "reps": 1, "warmup_s": 0, "timer": "wall", "adapter": "a"}))
    with pytest.raises(ValueError, match="checked already"):
        bench_jobs.check(job, 0, bytes(raw))


def test_smoke_run_records_checked_figures(native_runtime, tmp_path):
    out = tmp_path / "decode.json"
    decode_bandwidth.main(
        ["--smoke", "--case", "target", "--modes", "trusted", "--sweep", "2", "--rounds", "5", "--warm", "0", "--json", str(out)]
    )
    records = [json.loads(line) for line in out.read_text().splitlines()]
    copy = [r for r in records if r["kind"] == "copy" and r["impl"] == bandwidth.COPY]
    decode_records = [r for r in records if r["kind"] == "decode" and r["impl"].startswith("paged_decode.split")]
    assert copy and copy[0]["gbps"] > 0 and copy[0]["rounds"] == 5
    (rule,) = [r for r in decode_records if r["rule"]]
    assert rule["mode"] == "trusted" and rule["gbps"] > 0 and rule["median_ms"] > 0 and rule["q1_ms"] <= rule["q3_ms"]
    assert rule["verified"]["ok"] and rule["pct_of_copy"] > 0
    assert [r["splits"] for r in decode_records if not r["rule"]] == [2]  # the sweep, in the same series
    assert rule["bytes"] == bytes_touched([700, 700], -1, 1, 8, 128, 2)


def test_the_stream_kernel_copies_every_byte_and_the_read_writes_nothing(native_runtime):
    """The copy a decode kernel is compared with moves exactly its bytes, a ragged tail included
    (not a whole step of 8 vec4s an invocation); the read-only stream leaves dst as it was."""
    nbytes = 16 * (256 * 8 * 3 + 37)
    src = np.random.default_rng(1).integers(0, 2**32, nbytes // 4, dtype=np.uint32)
    for write in (True, False):
        got = np.frombuffer(
            _read_back(native_runtime, bandwidth.stream_plan(nbytes, write=write), "dst", src.tobytes()), np.uint32
        )
        np.testing.assert_array_equal(got, src if write else np.zeros(4, np.uint32))
    assert bandwidth.copy_bytes(nbytes + 5, 1 << 30) == nbytes and bandwidth.copy_bytes(nbytes, 4096) == 4096
